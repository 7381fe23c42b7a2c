/**
 * One record per session a node serves (issue #20: it lived in five maps keyed by the same id).
 * The SessionManager owns these records; the Shard keeps the session's KV under `key`.
 */
import { type DType, sha256 } from '../../protocol/index.js'
import type { ChainLink } from './chain.js'

/** A session's keys on this hop (never logged), and its reusable export buffers. */
export interface SessionKeys {
  readonly clientId: string
  readonly span: readonly [number, number]
  readonly stepMacKey: Uint8Array
  readonly snapshotKey?: Uint8Array
  plain: Uint8Array
  sealed: Uint8Array
  /**
   * The last wrapped import key and what it unwrapped to: a standby, or a snapshot streamed in
   * frames, gets the same wrapped key with every import, and an X25519 exchange is the costliest step of an import.
   */
  importKey?: { readonly wrapped: Uint8Array; readonly key: Uint8Array }
  /** Where this session's imports left off (a standby fed with deltas appends after it). */
  imported?: { readonly snapshotSessionId: string; readonly sequence: number; readonly end: number }
}

export interface NodeSession {
  /** The id its owner chose: what requests, receipts and snapshots name. */
  readonly id: string
  /**
   * Unique on this node: the owner's peer id and the id (issue #17: ids were global, so a peer
   * could squat the id a client would use next). The Shard's session key.
   */
  readonly key: string
  /** The peer that opened the session (the client). */
  readonly owner: string
  /** In chained mode, the peer whose output this hop takes (its steps carry the client's tag). */
  readonly upstream?: string
  /**
   * Chained mode, per-hop ids (issue #39): the upstream hop's own session id, which its receipts
   * are signed for. Absent: this session's id (a chain under one id).
   */
  readonly upstreamSessionId?: string
  readonly start: number
  readonly end: number
  readonly maxLength: number
  /** The activation dtype negotiated at open (every link of a chain shares it). */
  readonly wireDtype: DType
  lastUsed: number
  /**
   * The last step, kept so a retried step (same id, position, rows and input bytes) is answered
   * without recomputing. The input's hash is part of it: the receipt of a step signs its input, so
   * answering a different input with a kept output would sign one output for two inputs, which
   * the client's replay index rightly reads as a replay (client/verification/replay-index.ts).
   */
  last?: { stepId: number; startPosition: number; rows: number; inputHash: Uint8Array; output: Float32Array }
  /** The highest step id the upstream ran: its steps must go up (a replayed tag cannot rewind the KV). */
  upstreamStepId: number
  /** Chained forwarding: the stream to the next hop and, on the last hop, outputs awaiting the client. */
  chain?: ChainLink
  /** Hop keys from the client's X25519 key (none when the client sent no key). Zeroed on release. */
  keys?: SessionKeys
}

/** Peer ids hold no '/', so owner and id cannot run into each other. */
export function sessionKey(owner: string, id: string): string {
  return `${owner}/${id}`
}

/** Frees what a session holds besides its KV: the chain stream and its keys (zeroed first). */
export function releaseSession(s: NodeSession): void {
  s.chain?.close()
  s.chain = undefined
  const k = s.keys
  if (k) {
    k.snapshotKey?.fill(0)
    k.importKey?.key.fill(0)
    k.stepMacKey.fill(0)
    s.keys = undefined
  }
}

/** The hash a retried step's input must match (node-session `last`). */
export function stepInputHash(hidden: Float32Array): Uint8Array {
  return sha256(new Uint8Array(hidden.buffer, hidden.byteOffset, hidden.byteLength))
}

/** Whether a step is a retry of the session's last one: same id, position, rows and input. */
export function isRetryOfLast(
  s: NodeSession,
  stepId: number,
  startPosition: number,
  rows: number,
  inputHash: Uint8Array
): boolean {
  const last = s.last
  if (!last || last.stepId !== stepId || last.startPosition !== startPosition || last.rows !== rows) return false
  return Buffer.compare(Buffer.from(last.inputHash), Buffer.from(inputHash)) === 0
}
