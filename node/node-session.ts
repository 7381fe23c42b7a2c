/**
 * One record per session a node serves (issue #20: it lived in five maps keyed by the same id).
 * The SessionManager owns these records; the Shard keeps the session's KV under `key`.
 */
import type { DType } from '../protocol/index.js'
import type { ChainLink } from './chain.js'
import type { SessionKeys } from './session-crypto.js'

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
  readonly start: number
  readonly end: number
  readonly maxLength: number
  /** The activation dtype negotiated at open (every link of a chain shares it). */
  readonly wireDtype: DType
  lastUsed: number
  /** The last step, kept so a retried step (same id, position and rows) is answered without recomputing. */
  last?: { stepId: number; startPosition: number; rows: number; output: Float32Array }
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
