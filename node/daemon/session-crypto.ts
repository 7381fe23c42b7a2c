import { timingSafeEqual } from 'node:crypto'
import {
  assertStepAuthorized,
  chainedStepBinding,
  deriveHopKeys,
  generateX25519KeyPair,
  openSnapshot,
  type SnapshotHeader,
  SnapshotMisboundError,
  SnapshotOrderError,
  sealedSnapshotSize,
  sealSnapshot,
  unwrapKey,
  unwrapKeyUnder,
  type X25519KeyPair,
  x25519SharedSecret
} from '../../crypto/index.js'
import {
  BadPositionError,
  BadShapeError,
  type SessionRequest,
  type SessionResponseBody,
  UnauthorizedError
} from '../../protocol/index.js'
import { errorCode, type ShardLike } from '../../shards/index.js'
import type { NodeSession, SessionKeys } from './node-session.js'
import type { SessionManager } from './session-manager.js'

export type { SessionKeys }

/** A buffer of at least n bytes: `buf` when it is big enough, else a new one with headroom. */
function atLeast(buf: Uint8Array, n: number): Uint8Array {
  return buf.length >= n ? buf : new Uint8Array(Math.max(n, Math.floor(buf.length * 1.5)))
}

export interface SessionCryptoContext {
  readonly peerId: string
  readonly modelId: string
  readonly shard: ShardLike
  readonly sessions: SessionManager
  /** An import was refused: the node drops the half-built session (nothing of it is kept). */
  readonly onRefused: (session: NodeSession, code?: string) => void
}

/**
 * The cryptographic side of a node's sessions (docs/design.md §6): its X25519 key, each session's hop
 * keys (from the client's X25519 key, HKDF over session, span and both peer ids), the step tags
 * of chained forwarding, and sealed KV export and import.
 */
export class SessionCrypto {
  /** This peer's X25519 key for key agreement, and its identity's signature over it. */
  readonly x25519: X25519KeyPair = generateX25519KeyPair()
  binding: Uint8Array = new Uint8Array(0)
  /** Scratch plaintext of imports (reused: fresh large allocations are slow). */
  private importScratch: Uint8Array = new Uint8Array(0)

  constructor(private readonly ctx: SessionCryptoContext) {}

  /** The session's hop keys from the client's X25519 key (none without one), and its snapshot key. */
  keysFor(o: Extract<SessionRequest, { type: 'open' }>['open'], from: string): SessionKeys | undefined {
    const span = [o.start, o.end] as const
    if (!o.clientX25519PublicKey?.length) {
      if (o.wrappedSnapshotKey?.length) throw new UnauthorizedError('a snapshot key needs the client X25519 key')
      return undefined
    }
    const sharedSecret = x25519SharedSecret(this.x25519.secretKey, o.clientX25519PublicKey)
    const hop = deriveHopKeys({ sharedSecret, sessionId: o.sessionId, span, clientPeerId: from, hopPeerId: this.ctx.peerId })
    sharedSecret.fill(0)
    const snapshotKey = o.wrappedSnapshotKey?.length
      ? unwrapKeyUnder(hop.snapshotKeyWrapKey, o.wrappedSnapshotKey, {
          recipientPeerId: this.ctx.peerId,
          sessionId: o.sessionId,
          span
        })
      : undefined
    return { clientId: from, span, stepMacKey: hop.stepMacKey, snapshotKey, plain: new Uint8Array(0), sealed: new Uint8Array(0) }
  }

  /**
   * A chained step from an upstream hop (not the owner) must carry the client's tag for this hop
   * first in hop_auth, over the client's input hash (upstreamClientInputHash, already checked). Of the sessions `id` that `from` feeds (one per client that routed through
   * it), the one whose key verifies the tag is the step's. Returns it and the tags for the hops after us.
   */
  upstreamStep(
    candidates: readonly NodeSession[],
    s: Extract<SessionRequest, { type: 'step' }>['step'],
    rows: number,
    clientInputHash: Uint8Array
  ): { session: NodeSession; tags: Uint8Array[] } {
    const tags = s.hopAuth ?? []
    const fields = {
      sessionId: s.sessionId,
      stepId: s.stepId,
      startPosition: s.startPosition,
      inputHash: chainedStepBinding(rows, clientInputHash)
    }
    let refusal: unknown = new UnauthorizedError(`session ${s.sessionId} has no client key: a chained step cannot be authorized`)
    for (const session of candidates) {
      if (!session.keys) continue
      try {
        assertStepAuthorized(session.keys.stepMacKey, fields, tags[0])
        return { session, tags: tags.slice(1) }
      } catch (err) {
        refusal = err
      }
    }
    throw refusal
  }

  /** ExportKv: the session's KV for [from, to) sealed under its snapshot key (owner only). */
  sealKv(session: NodeSession, e: Extract<SessionRequest, { type: 'exportKv' }>['exportKv']): SessionResponseBody {
    const k = session.keys
    if (!k?.snapshotKey) throw new UnauthorizedError(`session ${e.sessionId} was opened without a snapshot key`)
    const { shard } = this.ctx
    // the range is checked before anything is allocated for it (issue #17: `to` sized the buffer)
    const length = shard.sessionLength(session.key)
    if (e.to > length) throw new BadPositionError(`export of [${e.from}, ${e.to}): the session holds ${length} positions`)
    const n = (e.to - e.from) * shard.kvBytesPerPosition(session.key)
    k.plain = atLeast(k.plain, n)
    const payload = shard.exportKv(session.key, e.from, e.to, k.plain.subarray(0, n))
    const header: SnapshotHeader = {
      modelId: this.ctx.modelId,
      sessionId: e.sessionId,
      span: k.span,
      tokenRange: [e.from, e.to],
      prefixHash: e.prefixHash,
      sequence: e.sequence,
      clientId: k.clientId,
      kind: e.delta ? 'delta' : 'full',
      dtype: shard.kvDType
    }
    k.sealed = atLeast(k.sealed, sealedSnapshotSize(header, n))
    const snapshot = sealSnapshot({ key: k.snapshotKey, header, payload, out: k.sealed })
    payload.fill(0)
    return { type: 'snapshot', snapshot: { sessionId: e.sessionId, snapshot } }
  }

  /**
   * ImportKv: unwrap the snapshot key (it must be wrapped to our X25519 key), open every snapshot
   * (tag, then every bound field, sequence and order) and only then write the KV. Into a fresh
   * session a full snapshot comes first; with `append`, deltas continue what this session's
   * earlier imports built (same sealed session, higher sequence, starting where they ended, no
   * step in between): how a standby is fed every N tokens and how large snapshots stream in
   * frames of a few MiB. Any refusal closes the session: nothing of it is kept.
   */
  openKv(session: NodeSession, im: Extract<SessionRequest, { type: 'importKv' }>['importKv']): SessionResponseBody {
    const { shard } = this.ctx
    const k = session.keys
    let key: Uint8Array | undefined
    let used = 0
    try {
      if (!k) throw new UnauthorizedError(`session ${im.sessionId} was opened without a client key`)
      const prior = im.append ? this.priorImport(k, im, shard.sessionLength(session.key)) : undefined
      if (!im.append && shard.sessionLength(session.key) !== 0)
        throw new BadShapeError(`session ${im.sessionId} already holds KV: import only into a fresh session`)
      key = this.unwrapImportKey(k, im.wrappedKey, im.sessionId)
      let total = 0
      for (const b of im.snapshots) total += b.length
      this.importScratch = atLeast(this.importScratch, total)
      const opened: Array<{ from: number; payload: Uint8Array }> = []
      let sequence = prior ? prior.sequence : -1
      let end = prior ? prior.end : 0
      for (let i = 0; i < im.snapshots.length; i++) {
        const last = i === im.snapshots.length - 1
        const expect = {
          modelId: this.ctx.modelId,
          sessionId: im.snapshotSessionId,
          span: k.span,
          clientId: k.clientId,
          minSequence: sequence + 1,
          ...(i > 0 || prior ? { expectedFrom: end } : {}),
          ...(last ? { prefixHash: im.prefixHash } : {}),
          dtype: shard.kvDType
        }
        const o = openSnapshot(im.snapshots[i], key, expect, this.importScratch.subarray(used))
        used += o.payload.length
        if ((i === 0 && !prior) !== (o.header.kind === 'full'))
          throw new SnapshotOrderError('snapshot refused: a full snapshot must come first, then deltas')
        sequence = o.header.sequence
        end = o.header.tokenRange[1]
        opened.push({ from: o.header.tokenRange[0], payload: o.payload })
      }
      for (const o of opened) shard.importKv(session.key, o.from, o.payload, shard.kvDType)
      this.ctx.sessions.reset(session)
      k.imported = { snapshotSessionId: im.snapshotSessionId, sequence, end }
      return { type: 'imported', imported: { sessionId: im.sessionId, length: shard.sessionLength(session.key) } }
    } catch (err) {
      this.ctx.onRefused(session, errorCode(err))
      throw err
    } finally {
      key?.fill(0)
      this.importScratch.fill(0, 0, used)
    }
  }

  /** The snapshot key of an import (a copy the caller zeroes): unwrapped once per wrapped key. */
  private unwrapImportKey(k: SessionKeys, wrapped: Uint8Array, sessionId: string): Uint8Array {
    const known = k.importKey
    if (known && known.wrapped.length === wrapped.length && timingSafeEqual(known.wrapped, wrapped)) return known.key.slice()
    const key = unwrapKey(wrapped, this.x25519.secretKey, { recipientPeerId: this.ctx.peerId, sessionId, span: k.span })
    known?.key.fill(0)
    k.importKey = { wrapped: wrapped.slice(), key: key.slice() }
    return key
  }

  /** What an appending import continues: the session's last import, with nothing run since. */
  private priorImport(
    k: SessionKeys,
    im: { sessionId: string; snapshotSessionId: string },
    length: number
  ): NonNullable<SessionKeys['imported']> {
    const prior = k.imported
    if (!prior) throw new SnapshotOrderError(`snapshot refused: session ${im.sessionId} has no earlier import to append to`)
    if (prior.snapshotSessionId !== im.snapshotSessionId)
      throw new SnapshotMisboundError('sessionId', 'snapshot refused: an append must continue the snapshots of the same session')
    if (length !== prior.end)
      throw new SnapshotOrderError(
        `snapshot refused: session ${im.sessionId} holds ${length} positions, its imports ended at ${prior.end}`
      )
    return prior
  }
}
