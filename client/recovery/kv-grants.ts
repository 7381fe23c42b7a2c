/**
 * The client's side of a node-to-node KV move (issue #41): it signs a grant with its identity
 * key, asks the source (its live hop) to seal the range and send it straight to the destination
 * (a standby, or a replacement), and checks the destination's signed receipt. The client sends a
 * grant and a few prefix hashes and gets a receipt back: no KV crosses its link.
 */
import { randomBytes } from 'node:crypto'
import type { AbortOptions, PrivateKey } from '@libp2p/interface'
import { peerIdFromString } from '@libp2p/peer-id'
import { sha256Prefixes } from '../../crypto/index.js'
import {
  DEFAULT_KV_GRANT_LIFETIME_MS,
  decodeKvMoveResponse,
  encodeKvMoveRequest,
  errorFromReply,
  type Host,
  KV_GRANT_ID_BYTES,
  KV_MOVE_PROTOCOL,
  type KvReceipt,
  MAX_CONTROL_BYTES,
  request,
  signKvGrant,
  verifyKvReceipt,
  wrappedKeyHash
} from '../../protocol/index.js'
import { KvRestoreMismatchError } from '../errors.js'
import type { HopSession } from '../session/hop.js'
import { SNAPSHOT_CHUNK_BYTES } from './snapshots.js'

export interface KvMoveInit {
  readonly host: Host
  /** The client's identity key: it signs the grants (its peer id owns both sessions). */
  readonly privateKey: PrivateKey
  readonly modelId: string
  readonly dim: number
  readonly grantLifetimeMs?: number
}

/** One end of a move: a peer and the session there (a holder's: KV_HOLD_SESSION_ID; a holder as source: the sealing session's id). */
export interface KvMoveParty {
  readonly peerId: string
  readonly sessionId: string
}

export function partyOf(h: HopSession): KvMoveParty {
  return { peerId: h.target.peerId, sessionId: h.sessionId }
}

/** The parties and span of a move from one hop session into another (a live hop into its standby). */
export function betweenHops(source: HopSession, destination: HopSession) {
  return { source: partyOf(source), destination: partyOf(destination), span: [source.target.start, source.target.end] as const }
}

/** One move: span `span`'s positions [from, to) of `source` into `destination`, sequences from `firstSequence`. */
export interface KvMove {
  readonly source: KvMoveParty
  readonly destination: KvMoveParty
  readonly span: readonly [number, number]
  readonly from: number
  readonly to: number
  readonly firstSequence: number
  /** The snapshot key wrapped for the destination (made once per destination; KV_HOLD_NO_KEY for a holder). */
  readonly wrappedKey: Uint8Array
  /** The last sequence the destination must hold (default: firstSequence + chunks - 1; a holder forwards its own). */
  readonly sequence?: number
}

/**
 * Chunk ends of [from, to): about SNAPSHOT_CHUNK_BYTES each, from an upper bound of the span's KV
 * bytes per position (keys and values of every block at the model width, f32), since the client
 * never sees a byte of the KV to learn its real size.
 */
export function chunkEnds(span: readonly [number, number], dim: number, from: number, to: number): number[] {
  const perPosition = (span[1] - span[0]) * 2 * dim * 4
  const step = Math.max(1, Math.floor(SNAPSHOT_CHUNK_BYTES / perPosition))
  const ends: number[] = []
  for (let e = from; e < to; ) ends.push((e = Math.min(to, e + step)))
  return ends
}

/** Move one range node to node under a fresh grant; returns the destination's checked receipt. */
export async function moveKv(
  init: KvMoveInit,
  m: KvMove,
  history: Float32Array,
  { signal }: AbortOptions = {}
): Promise<KvReceipt> {
  const { source, destination, span, wrappedKey } = m
  const ends = chunkEnds(span, init.dim, m.from, m.to)
  const bytes = new Uint8Array(history.buffer, history.byteOffset, history.byteLength)
  const hashes = sha256Prefixes(
    bytes,
    ends.map((e) => e * init.dim * 4)
  )
  const grant = await signKvGrant(
    {
      grantId: new Uint8Array(randomBytes(KV_GRANT_ID_BYTES)),
      clientPeerId: init.host.peerId.toString(),
      sourcePeerId: source.peerId,
      destinationPeerId: destination.peerId,
      modelId: init.modelId,
      sourceSessionId: source.sessionId,
      destinationSessionId: destination.sessionId,
      start: span[0],
      end: span[1],
      fromPosition: m.from,
      toPosition: m.to,
      prefixHash: hashes[hashes.length - 1],
      expiresAtMs: Date.now() + (init.grantLifetimeMs ?? DEFAULT_KV_GRANT_LIFETIME_MS),
      wrappedKeyHash: wrappedKeyHash(wrappedKey)
    },
    init.privateKey
  )
  const reply = await request(
    init.host,
    peerIdFromString(source.peerId),
    KV_MOVE_PROTOCOL,
    encodeKvMoveRequest({
      type: 'push',
      push: { grant, wrappedKey, firstSequence: m.firstSequence, chunkEnds: ends, chunkPrefixHashes: hashes }
    }),
    { signal, maxMessageBytes: MAX_CONTROL_BYTES }
  )
  const r = decodeKvMoveResponse(reply)
  if (r.type === 'error') throw errorFromReply(r.error)
  const receipt = r.receipt
  const sequence = m.sequence ?? m.firstSequence + ends.length - 1
  // the receipt must be the destination's own signature that it holds exactly the granted range
  if (
    receipt.destinationPeerId !== destination.peerId ||
    receipt.destinationSessionId !== destination.sessionId ||
    !receipt.grantId.every((b, i) => b === grant.grantId[i]) ||
    receipt.length !== m.to ||
    receipt.sequence !== sequence ||
    !(await verifyKvReceipt(receipt))
  )
    throw new KvRestoreMismatchError(
      `receipt of ${destination.peerId} does not show positions [0, ${m.to}) at sequence ${sequence}`
    )
  return receipt
}
