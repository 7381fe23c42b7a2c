// What a client is made from, what generate() and stream() take, and what they return.
import type { PrivateKey } from '@libp2p/interface'
import type { GrammarNode, Kernels, KvDType, SamplerOptions, TokenLogprobs } from '../shards/index.js'
import type { HeadStats } from './head/remote-head.js'
import type { Forwarding } from './session/remote-pipeline.js'
import type { RollbackRecord } from './session/rollback.js'
import type { WireReport } from './session/wire-ledger.js'
import type { WirePreference } from './session/wire-negotiation.js'
import type { SpeculateMode } from './speculation/speculation.js'
import type { SpeculationStats } from './speculation/speculative-decode.js'
import type { CanaryBankInit } from './verification/canaries/canary-bank-init.js'
import type { PromptTemplate } from './verification/canaries/canary-template.js'
import type { CanaryEvidence, CanaryOptions, CanaryPeerReport } from './verification/canary-monitor.js'
import type { ReceiptSummary } from './verification/receipts.js'
import type { ReplayEvidence } from './verification/replay-index.js'

export interface ClientInit {
  /** Multiaddrs (with /p2p/<id>) of swarm peers to join through. */
  readonly bootstrap: readonly string[]
  /**
   * The client's libp2p identity (default: a fresh one per client). A kept key (the CLI's
   * `--identity`) makes the client the same peer across runs: nodes see one owner of its sessions,
   * and sealed KV snapshots stay bound to it.
   */
  readonly privateKey?: PrivateKey
  /**
   * Addresses the client listens on (default none: it only dials). A client with a public
   * address lets a node behind NAT that it reached through a relay dial it back directly (DCUtR).
   */
  readonly listen?: readonly string[]
  /** Addresses to tell peers instead (libp2p announces a public listen address only once AutoNAT confirmed it). */
  readonly announce?: readonly string[]
  /**
   * The model file: the client runs its edge parts and checks peers serve the same model id
   * (default: the bundled stories260K.gguf, as the CLI's).
   */
  readonly model?: string
  /**
   * Issue 33: a content model id (lsw1-…) instead of `model`: the client fetches only what it
   * runs (header and tokenizer, embeddings, its edge blocks, final norm, head) from the swarm,
   * checked chunk by chunk against the id, into `modelsDir`. Canaries without a `canaryBank` need
   * the middle blocks too, so those are then fetched as well (docs/weights.md).
   */
  readonly modelId?: string
  /** Where fetched models are kept (default `$LAYERSWARM_HOME/models`, else `~/.layerswarm/models`). */
  readonly modelsDir?: string
  /**
   * Issue 33: with `modelId`, the client serves the chunks it fetched to other peers on its host
   * (/layerswarm/weights), as every node does, under these upload caps in bytes/s (0: none).
   * Peers reach it where it listens (`listen`) or over a connection it holds. Default on; false: off.
   */
  readonly seedWeights?: false | { readonly maxUploadBytesPerSecond?: number; readonly maxPeerUploadBytesPerSecond?: number }
  readonly tokenizer?: string
  /** Blocks the client runs itself before / after the remote span (default 1 and 1). */
  readonly edgeFirst?: number
  readonly edgeLast?: number
  /**
   * Issue #35: 'remote' runs the final norm and LM head on the peer of the last block, which
   * answers the sealed top-k (edgeLast must be 0 then). That peer learns the output distribution,
   * hence the generated text (docs/security.md). Default 'local'.
   */
  readonly head?: 'local' | 'remote'
  /** With head 'remote': secret random head rows the client checks the head peer with (default 1024). */
  readonly headSecretRows?: number
  /** With head 'remote': the dtype the last hop's hidden output travels in for the check (default q8_0). */
  readonly headCheckDtype?: 'f32' | 'f16' | 'q8_0'
  readonly forwarding?: Forwarding
  /**
   * Activation dtype on the wire: 'auto' (per hop, f16 where accepted — client/session/wire-negotiation.ts) or one
   * of f32, f16, q8_0 (int8) on every hop. Default f32: bit-identical to one process.
   */
  readonly wireDtype?: WirePreference
  readonly stepTimeoutMs?: number
  readonly banMs?: number
  readonly maxFailovers?: number
  /** How long to wait for announcements until the remote blocks are covered. */
  readonly routeTimeoutMs?: number
  readonly kernels?: Kernels
  /** KV cache storage of the client's own edge blocks (default f32: options.ts DEFAULT_EDGE_KV_DTYPE). */
  readonly kvDType?: KvDType
  readonly log?: (e: Record<string, unknown>) => void
  /** Progress of building a canary set (boundary, canaries built, in all): for progress bars. */
  readonly onCanaryBuild?: (boundary: number, built: number, total: number) => void
  /** Canary verification (docs/design.md §5, docs/verification.md); on by default at 3 % of steps; false turns it off. */
  readonly canaries?: CanaryOptions | false
  /**
   * Every this many positions, each hop seals a KV delta the client keeps (it cannot read
   * them); a failover then restores from them and replays only the positions after (default off).
   */
  readonly snapshotEvery?: number
  /**
   * With snapshotEvery: per span a standby peer (serving it, not on the route) imports every
   * sealed delta, so when a hop dies it takes over with its KV in place (default off).
   */
  readonly standby?: boolean
  /**
   * With standby: 'node' (default) feeds the standbys node to node under grants the client signs
   * (no KV crosses the client's link; a span with no standby falls back to client-kept
   * snapshots); 'client' keeps the sealed snapshots here and forwards them.
   */
  readonly kvPath?: 'node' | 'client'
  /** Streams hold tokens until their peers have cleared (GenerateOptions.verifiedStream); default off. */
  readonly verifiedStream?: boolean
  /** Speculative steps: off, ngram, self or draft:<file> (docs/speculation.md); default ngram (options.ts). */
  readonly speculate?: SpeculateMode
  /**
   * A canary bank (`layerswarm canary build`): canaries come from it, and the client reads no
   * weight of the blocks it does not run (a thin client; client/verification/canaries/canary-bank-init.ts).
   */
  readonly canaryBank?: CanaryBankInit
}

export interface GenerateOptions extends SamplerOptions {
  readonly maxTokens?: number
  readonly signal?: AbortSignal
  readonly forwarding?: Forwarding
  /**
   * Hold each token back until every peer that computed it has passed the evidence threshold
   * (its canary start-up burst answered clean, not a suspect); default ClientInit.verifiedStream.
   */
  readonly verifiedStream?: boolean
  /**
   * The result waits until every peer that computed it has passed the canary threshold (extra
   * canaries at the end when a generation ends before a new peer's start-up burst does); a peer
   * that cannot be checked is routed around and its tokens recomputed. Default true (canaries on).
   */
  readonly verifyResult?: boolean
  /** Sees the logits of every step (for tests and tools). */
  readonly onLogits?: (logits: Float32Array, position: number) => void
  /** The prompt is a chat template's output: its control tokens (`<|eot_id|>`) are tokens, not text. */
  readonly special?: boolean
  /**
   * How the prompt was made from a user message (with `special`: the chat template, as the gateway
   * passes it). Secret canaries then go through it as often as the client's sessions do, so a
   * peer sees templated decoys among templated sessions (client/verification/canaries/canary-template.ts).
   */
  readonly promptTemplate?: PromptTemplate
  /** Speculative steps for this generation (default ClientInit.speculate). */
  readonly speculate?: SpeculateMode
  /**
   * Structured output (issue 37): the completion is JSON matching this JSON schema, enforced by
   * constrained sampling on the client (shards/constrain). Unsupported keywords throw
   * UnsupportedSchemaError. Speculation is off for constrained generations.
   */
  readonly schema?: object
  /** A grammar made by the caller (shards/constrain: tool-call wrappers), instead of `schema`. */
  readonly grammar?: GrammarNode
  /** With onSampled: the likeliest tokens to report with each sampled token's log-probability. */
  readonly topLogprobs?: number
  /** Each sampled token at its position (and its log-probabilities with topLogprobs); speculation off. */
  readonly onSampled?: (token: number, position: number, logprobs?: TokenLogprobs) => void
}

export interface VerificationReport {
  /** Every route the session used, in order (more than one after a failover). */
  readonly routes: Array<Array<{ peerId: string; start: number; end: number }>>
  readonly failovers: number
  readonly excludedPeers: string[]
  readonly edge: { first: [number, number]; last: [number, number] }
  readonly forwarding: Forwarding
  /** Signed receipts checked per peer (signature, span, hash chain from input to output). */
  readonly receipts: ReceiptSummary
  /** Canary verdicts per peer: canaries sent, last drift, posterior P(tampering), exclusion. */
  readonly canaries: CanaryPeerReport[]
  /** Canaries that convicted a peer, with the receipt it signed for its wrong answer. */
  readonly evidence: CanaryEvidence[]
  /** Peers convicted by their own receipts: one output signed for two different inputs (both receipts). */
  readonly replays: ReplayEvidence[]
  /** Times part of the generation was recomputed because a peer that computed it was convicted. */
  readonly reruns: number
  /** Each recomputation: from which completion token, how many were void, whose conviction. */
  readonly rollbacks: RollbackRecord[]
  /** The wire dtype each hop used and the activation bytes on the wire per token. */
  readonly wire: WireReport
}

export interface GenerateResult {
  readonly promptTokens: number[]
  readonly tokens: number[]
  readonly text: string
  readonly report: VerificationReport
  /** Peers convicted by canaries while this generation ran. */
  readonly convicted: string[]
  /** Speculative steps: drafted and kept tokens, steps (all zero with speculation off). */
  readonly speculation: SpeculationStats
  /** With head 'remote' (issue #35): steps, full-row fallbacks, checks, violations, convicted head peers. */
  readonly head?: HeadStats
}
