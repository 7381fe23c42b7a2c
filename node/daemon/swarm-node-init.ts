import type { PrivateKey } from '@libp2p/interface'
import type { AnnouncementContent, DType, InfoResponse, ReachabilityInit } from '../../protocol/index.js'
import type { ModelFile, ShardLike } from '../../shards/index.js'
import {
  DEFAULT_FIRST_STEP_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_ORPHAN_TIMEOUT_MS,
  type PeerLimitOptions
} from '../options.js'
import type { HeadRowTransform } from './head-serve.js'
import type { Metrics } from './metrics.js'
import type { SessionManagerInit } from './session-manager.js'

/** What runs the span, as the node announces it (issue 32): routing and `join` read it. */
export interface NodeHardware {
  /** native, wasm, reference (the engine's kernels) or ggml-cpu, ggml-cuda, ggml-vulkan, ggml-metal. */
  readonly backend: string
  /** The ggml device, e.g. "CUDA:NVIDIA H100 80GB HBM3". */
  readonly device?: string
  readonly deviceMemoryBytes?: number
}

/** What a SwarmNode serves and how (node/daemon/server.ts); the CLI's `node start` options end up here. */
export interface SwarmNodeInit {
  readonly model: ModelFile
  readonly modelId: string
  readonly shard: ShardLike
  /** Issue #35, developers only: rewrite each head row before it is sealed (`node start --tamper-head`). */
  readonly tamperHead?: HeadRowTransform
  readonly listen?: string[]
  readonly bootstrap?: string[]
  readonly privateKey?: PrivateKey
  /** Announced addresses and reachability services of the host (protocol/reachability.ts). */
  readonly announce?: string[]
  readonly reachability?: ReachabilityInit
  readonly maxSessions?: number
  /** KV positions over all sessions (default: maxSessions × context length). */
  readonly maxCacheTokens?: number
  readonly idleTimeoutMs?: number
  /** How long the last hop waits for a chained step the client awaits. */
  readonly chainTimeoutMs?: number
  readonly announceIntervalMs?: number
  /** Measured decode tokens/s of the span, announced to clients for routing. */
  readonly throughput: number
  /** What runs the span, announced with it (absent: not announced). */
  readonly hardware?: NodeHardware
  /** Issue 33: the content id (lsw1-…) the node seeds its weights under, announced with its span. */
  readonly contentId?: string
  /** Wire dtypes this node accepts and announces (`--wire`; default all). */
  readonly wireDtypes?: DType[]
  readonly log?: (event: Record<string, unknown>) => void
  /** Log every session request's source and shape (`--log-level trace`): what this peer sees of its traffic. */
  readonly traceRequests?: boolean
  /** Prometheus metrics (`--metrics`). */
  readonly metrics?: Metrics
  /** Keep the event loop polling this long after each session request (`--busy-poll`; node/daemon/busy-poll.ts). */
  readonly busyPollMs?: number
  /** Sessions one peer may hold at once (default: three quarters of maxSessions, so one peer never holds them all). */
  readonly maxSessionsPerPeer?: number
  /** Per-peer token buckets (node/options.ts DEFAULT_PEER_LIMITS). */
  readonly peerLimits?: Partial<PeerLimitOptions>
  /** Request bytes held in flight over all streams (default DEFAULT_BYTES_IN_FLIGHT). */
  readonly bytesInFlight?: number
  /** Steps waiting for the span at once, more get BUSY (node/options.ts DEFAULT_MAX_QUEUED_STEPS). */
  readonly maxQueuedSteps?: number
  /** Rows one batched forward over several sessions takes at most (DEFAULT_MAX_BATCH_ROWS). */
  readonly maxBatchRows?: number
  /** Milliseconds a batch waits for more steps (DEFAULT_BATCH_WAIT_MS). */
  readonly batchWaitMs?: number
  /** Per-source shares of sessions (default: half the slots per IP, three quarters per subnet; issue #39). */
  readonly maxSessionsPerIp?: number
  readonly maxSessionsPerSubnet?: number
  /** A session that took no step this long after its open is freed (DEFAULT_FIRST_STEP_TIMEOUT_MS). */
  readonly firstStepTimeoutMs?: number
  /** Sessions of an owner with no connection left are freed this long after it left (DEFAULT_ORPHAN_TIMEOUT_MS). */
  readonly orphanTimeoutMs?: number
}

/** Three quarters of the slots, rounded up, and one fewer than all when there are several. */
export function defaultSessionsPerPeer(maxSessions: number): number {
  return maxSessions <= 1 ? 1 : Math.min(maxSessions - 1, Math.ceil((maxSessions * 3) / 4))
}

/**
 * The per-IP and per-subnet shares of sessions and KV positions (issue #39): half of each per
 * IP and three quarters per subnet, so fresh peer ids from one address never hold more than
 * half of a node, and one /24 (or /48) never all of it. Loopback is not counted.
 */
export function sourceShares(
  maxSessions: number,
  maxCacheTokens: number,
  init: Pick<SwarmNodeInit, 'maxSessionsPerIp' | 'maxSessionsPerSubnet'> = {}
): {
  maxSessionsPerIp: number
  maxSessionsPerSubnet: number
  maxCacheTokensPerIp: number
  maxCacheTokensPerSubnet: number
} {
  const half = (n: number) => Math.max(1, Math.floor(n / 2))
  return {
    maxSessionsPerIp: init.maxSessionsPerIp ?? half(maxSessions),
    maxSessionsPerSubnet: init.maxSessionsPerSubnet ?? defaultSessionsPerPeer(maxSessions),
    maxCacheTokensPerIp: half(maxCacheTokens),
    maxCacheTokensPerSubnet: Math.max(1, Math.floor((maxCacheTokens * 3) / 4))
  }
}

/** The SessionManager's caps, shares and timeouts for a node started with `init` (defaults filled in). */
export function sessionLimits(init: SwarmNodeInit): SessionManagerInit {
  const maxSessions = init.maxSessions ?? DEFAULT_MAX_SESSIONS
  const maxCacheTokens = init.maxCacheTokens ?? maxSessions * init.model.config.seqLen
  return {
    shard: init.shard,
    maxSessions,
    maxSessionsPerOwner: init.maxSessionsPerPeer ?? defaultSessionsPerPeer(maxSessions),
    maxCacheTokens,
    idleTimeoutMs: init.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    ...sourceShares(maxSessions, maxCacheTokens, init),
    firstStepTimeoutMs: init.firstStepTimeoutMs ?? DEFAULT_FIRST_STEP_TIMEOUT_MS,
    orphanTimeoutMs: init.orphanTimeoutMs ?? DEFAULT_ORPHAN_TIMEOUT_MS
  }
}

/**
 * What a node announces: its info less what only an info request answers (the model's shape, its
 * session counts, the open proof), with the content id it seeds and the demand it sees (issue 33).
 */
export function announcementContent(
  info: InfoResponse,
  contentId: string | undefined,
  demandTokensPerMinute: number
): AnnouncementContent {
  const { nLayers: _n, dim: _d, maxSessions: _m, activeSessions: _a, openProofBits: _o, ...announced } = info
  return { ...announced, ...(contentId ? { contentId } : {}), demandTokensPerMinute }
}
