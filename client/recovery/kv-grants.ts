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
import { SNAPSHOT_CHUNK_BYTES, wrapFor } from './snapshots.js'

export interface KvMoveInit {
  readonly host: Host
  /** The client's identity key: it signs the grants (its peer id owns both sessions). */
  readonly privateKey: PrivateKey
  readonly modelId: string
  readonly dim: number
  readonly grantLifetimeMs?: number
}

/** One move: the live hop's session [from, to) into `destination`'s session, sequences from `firstSequence`. */
export interface KvMove {
  readonly source: HopSession
  readonly destination: HopSession
  readonly from: number
  readonly to: number
  readonly firstSequence: number
  /** The snapshot key wrapped for the destination (made once per destination). */
  readonly wrappedKey?: Uint8Array
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
  const { source, destination } = m
  const span = [source.target.start, source.target.end] as const
  const ends = chunkEnds(span, init.dim, m.from, m.to)
  const bytes = new Uint8Array(history.buffer, history.byteOffset, history.byteLength)
  const hashes = sha256Prefixes(
    bytes,
    ends.map((e) => e * init.dim * 4)
  )
  const wrappedKey = m.wrappedKey ?? wrapFor(destination, source.snapshotKey)
  const grant = await signKvGrant(
    {
      grantId: new Uint8Array(randomBytes(KV_GRANT_ID_BYTES)),
      clientPeerId: init.host.peerId.toString(),
      sourcePeerId: source.target.peerId,
      destinationPeerId: destination.target.peerId,
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
    peerIdFromString(source.target.peerId),
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
  // the receipt must be the destination's own signature that it holds exactly the granted range
  if (
    receipt.destinationPeerId !== destination.target.peerId ||
    receipt.destinationSessionId !== destination.sessionId ||
    !receipt.grantId.every((b, i) => b === grant.grantId[i]) ||
    receipt.length !== m.to ||
    receipt.sequence !== m.firstSequence + ends.length - 1 ||
    !(await verifyKvReceipt(receipt))
  )
    throw new KvRestoreMismatchError(
      `receipt of ${destination.target.peerId} does not show positions [0, ${m.to}) at sequence ${m.firstSequence + ends.length - 1}`
    )
  return receipt
}
