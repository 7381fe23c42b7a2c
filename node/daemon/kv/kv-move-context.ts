import type { PrivateKey } from '@libp2p/interface'
import type { AnnouncementStore, ByteBudget, Host } from '../../../protocol/index.js'
import type { ShardLike } from '../../../shards/index.js'
import type { NextHopPolicy } from '../next-hop-policy.js'
import type { SessionCrypto } from '../session-crypto.js'
import type { SessionManager } from '../session-manager.js'
import type { KvHoldStore } from './kv-hold.js'

/** What a node's kv-move service uses (kv-move.ts, kv-push.ts; issue #41). */
export interface KvMoveInit {
  readonly host: Host
  readonly announcements: AnnouncementStore
  readonly modelId: string
  readonly identity: PrivateKey
  readonly shard: ShardLike
  readonly sessions: SessionManager
  readonly crypto: SessionCrypto
  readonly budget: ByteBudget
  readonly signal: AbortSignal
  readonly log?: (e: Record<string, unknown>) => void
  /** Refusals are counted with the node's other request errors (`layerswarm_errors_total{code}`). */
  readonly metrics?: { error(code: string): void }
}

export interface KvMoveContext extends KvMoveInit {
  readonly peerId: string
  readonly nextHops: NextHopPolicy
  /** Sealed KV this node holds for clients (kv-hold.ts). */
  readonly holds: KvHoldStore
}

/** Sealed bytes beyond the payload a frame may carry per snapshot (header, nonce, tag) and per frame. */
export const SEAL_SLACK_BYTES = 4096
export const FRAME_SLACK_BYTES = 64 * 1024
