/**
 * Defaults of the node's abuse limits (issue #17), in one place. Sessions per node and idle
 * timeouts are the CLI's (node/cli/commands/node/node-start.ts).
 */

export interface PeerLimitOptions {
  /** Session requests a peer may send per second, on average, and in one burst. */
  readonly requestsPerSecond: number
  readonly requestBurst: number
  /** Request bytes a peer may send per second, on average, and in one burst. */
  readonly bytesPerSecond: number
  readonly byteBurst: number
  /** Peers whose buckets are remembered at once (full ones are forgotten first). */
  readonly maxTrackedPeers: number
}

/**
 * Generous for one honest client (a decode step per hop per token, prefill frames of a few MiB,
 * imports of tens of MiB) and far below what a flood needs to hurt.
 */
export const DEFAULT_PEER_LIMITS: PeerLimitOptions = {
  requestsPerSecond: 1_000,
  requestBurst: 2_000,
  bytesPerSecond: 256 * 1024 * 1024,
  byteBurst: 512 * 1024 * 1024,
  maxTrackedPeers: 4_096
}

/** Sessions a node serves at once (`node start --max-sessions`); more get BUSY. */
export const DEFAULT_MAX_SESSIONS = 16

/** Bytes of request frames a node holds in flight over all streams (protocol/byte-budget.ts). */
export const DEFAULT_BYTES_IN_FLIGHT = 512 * 1024 * 1024

/**
 * Steps waiting for the span at once (`node start --max-queued-steps`); more get BUSY, so a
 * client moves to a replica instead of queueing behind a long line (issue #18). One step per
 * session in flight is the normal case, so the default admits every session's step.
 */
export const DEFAULT_MAX_QUEUED_STEPS = DEFAULT_MAX_SESSIONS * 4

/**
 * Rows one batched forward takes at most (`--max-batch-rows`): the steps of many sessions share
 * one read of the span's weights; past a few dozen rows a decode batch is compute bound.
 */
export const DEFAULT_MAX_BATCH_ROWS = 64

/**
 * Milliseconds a batch waits for more steps after its first one (`--batch-wait-ms`). 0: none, a
 * batch takes whatever is queued when the span is free (continuous batching), so a lone client
 * is not delayed.
 */
export const DEFAULT_BATCH_WAIT_MS = 0

/** Milliseconds without requests after which a node frees a session (`--idle-timeout`). */
export const DEFAULT_IDLE_TIMEOUT_MS = 5 * 60_000

/**
 * Milliseconds a session may stay open without its first step or import (`--first-step-timeout`;
 * issue #39): an honest client steps right after it opens (a standby imports), so a session that
 * has not is a squatter holding a slot and its KV.
 */
export const DEFAULT_FIRST_STEP_TIMEOUT_MS = 15_000

/** Milliseconds the sessions of an owner with no connection left are kept unused (`--orphan-timeout`; issue #39). */
export const DEFAULT_ORPHAN_TIMEOUT_MS = 10_000

/** Milliseconds between sweeps for idle, never-used and orphaned sessions. */
export const SESSION_SWEEP_INTERVAL_MS = 1_000

/** The folder a peer keeps its identity in (and a client its trust file and canary secret): `$LAYERSWARM_HOME`, else `~/.layerswarm`. */
export const HOME_ENV = 'LAYERSWARM_HOME'
export const DEFAULT_HOME_DIR_NAME = '.layerswarm'
/** A node's key file in that folder; a client's is CLIENT_IDENTITY_FILE_NAME, so both can run from one account. */
export const IDENTITY_FILE_NAME = 'identity.key'
export const CLIENT_IDENTITY_FILE_NAME = 'client-identity.key'
/** A client's trust file beside its key (client/verification/trust-file.ts); its canary secret sits beside that. */
export const TRUST_FILE_NAME = 'trust.json'

/** Milliseconds between a node's signed announcements of its span, and between pulls of its neighbours' (`--announce-interval`). */
export const DEFAULT_ANNOUNCE_INTERVAL_MS = 5_000

/** Milliseconds the last hop of a chain waits for a chained step the client awaits. */
export const DEFAULT_CHAIN_TIMEOUT_MS = 30_000

/** Milliseconds a node started by startNode (local-swarm.ts) has to print its address before it is killed. */
export const DEFAULT_NODE_START_TIMEOUT_MS = 30_000

/** The gateway's HTTP address (`api --listen`): loopback, so nothing is exposed without --api-key. */
export const DEFAULT_GATEWAY_LISTEN = '127.0.0.1:8080'

/** Generations the gateway runs at once (`api --max-concurrent`); more get HTTP 429. */
export const DEFAULT_GATEWAY_MAX_CONCURRENT = 4

/** Largest request body the gateway reads, in bytes. */
export const DEFAULT_GATEWAY_BODY_LIMIT_BYTES = 1 << 20

/**
 * Milliseconds a client has to send a whole request, headers and body (`api --request-timeout`);
 * then 408 and the connection closes. Only the request: a streamed answer is never cut by it
 * (issue #39: slow-body clients held connections open without end).
 */
export const DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS = 30_000

/** Milliseconds a client has to send a request's headers (at most the request timeout). */
export const DEFAULT_GATEWAY_HEADERS_TIMEOUT_MS = 10_000

/** Milliseconds an idle keep-alive connection stays open between requests. */
export const DEFAULT_GATEWAY_KEEP_ALIVE_TIMEOUT_MS = 5_000

/** Connections the gateway holds at once (`api --max-connections`); more are closed on arrival. */
export const DEFAULT_GATEWAY_MAX_CONNECTIONS = 256

/** Connections one IP address holds at once (`api --max-connections-per-ip`); more are closed on arrival. */
export const DEFAULT_GATEWAY_MAX_CONNECTIONS_PER_IP = 32

/**
 * Ranged downloads of /model.gguf at once (`api --max-model-downloads`); more get 503 with
 * Retry-After. A browser chat page fetches 4 ranges at once (client/browser/options.ts), so 16 lets
 * four pages load together.
 */
export const DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS = 16

/** How often the HTTP server looks for requests past their deadline: the most a cut is late, in ms. */
export const GATEWAY_TIMEOUT_CHECK_INTERVAL_MS = 1_000

/** Milliseconds the gateway's status page keeps its list of peers before asking the swarm again. */
export const DEFAULT_STATUS_REFRESH_MS = 2_000
