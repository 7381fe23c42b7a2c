/**
 * Defaults of the SDK (createClient's ClientInit and generate's options), in one place. The CLI's
 * defaults come from here too, so `layerswarm generate` and the SDK agree.
 */
import type { WirePreference } from './session/wire-negotiation.js'

/** Blocks the client runs itself before and after the remote span. */
export const DEFAULT_EDGE_FIRST = 1
export const DEFAULT_EDGE_LAST = 1
/** The SDK's wire dtype: f32 keeps logits bit-identical to one process (the CLI asks for auto). */
export const DEFAULT_WIRE: WirePreference = 'f32'
/** A hop that does not answer a step within this is treated as dead. */
export const DEFAULT_STEP_TIMEOUT_MS = 10_000
/**
 * How long a failover waits for a hop it leaves to confirm closing its session (in the
 * background; a hop that does not answer only gets its stream aborted, and frees the session at
 * its idle timeout).
 */
export const FAILOVER_CLOSE_MS = 1_000
/** How long a peer that failed a step stays out of routes. */
export const DEFAULT_BAN_MS = 60_000
/** Failovers one step may take before the generation fails. */
export const DEFAULT_MAX_FAILOVERS = 3
/** How long to wait for announcements until the remote blocks are covered. */
export const DEFAULT_ROUTE_TIMEOUT_MS = 10_000
/** New tokens at most, when generate() is not told. */
export const DEFAULT_MAX_TOKENS = 256

/**
 * KV cache of the client's own edge blocks. f32: a few blocks' cache is small, and an exact edge
 * keeps a swarm of f32 nodes bit-identical to one process (docs/design.md); nodes default to f16.
 */
export const DEFAULT_EDGE_KV_DTYPE = 'f32' as const

/**
 * Speculative steps (docs/speculation.md): off by default for now. With `ngram` greedy output is
 * the same tokens, sampling keeps the target distribution, and canary decoys take the same
 * shapes (rows per step, rewinds after rejected drafts: client/verification/canary-decoy-speculative.ts). It
 * stays opt-in until canaries keep pace with it: canary rates count real steps, a speculative
 * step carries about two tokens, and a thin client (edge blocks + canary bank) did not convict a
 * tamperer within 64 tokens with it on (test/e2e/rollback.test.ts).
 */
export const DEFAULT_SPECULATE = 'off' as const

/**
 * Redundancy checks (client/verification/redundancy-schedule.ts): the chance, after a real relayed step, that a
 * hop whose span another peer also serves gets the same decoy as that peer; and the decoy steps
 * each check runs (a prefill, then one row a step).
 */
export const DEFAULT_REDUNDANCY_RATE = 0.01
export const REDUNDANCY_STEPS = 4

/** How long a peer convicted by canaries or receipts stays out of routes, by default. */
export const CONVICTED_BAN_MS = 24 * 3600_000

/**
 * Temperature of sampled canary prompts (no corpus). The model's own text at temperature 1 is
 * likelier under it than people's prompts (mean NLL 1.38 against 1.86 nats for whole-sentence
 * prompts of stories260K); 1.2 brings it to 1.82 (docs/verification.md, issue 16).
 */
export const DEFAULT_CANARY_PROMPT_TEMPERATURE = 1.2
