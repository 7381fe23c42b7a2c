import type { AdaptiveRateOptions, CanaryTraces, Drift, DriftModel, PeerVerdict } from '../../canary/index.js'
import type { DType, Receipt } from '../../protocol/index.js'
import type { Edge, Kernels, Shard, Tokenizer } from '../../shards/index.js'
import type { HopTarget } from '../session/hop.js'

export interface CanaryOptions {
  /** Canaries per real step for a peer with a clean record, the base rate (default 0.03). */
  readonly rate?: number
  /** Per-peer rate (trust on evidence): start-up burst, suspect rate (canary/adaptive-rate.ts). */
  readonly adaptive?: Omit<AdaptiveRateOptions, 'base'> | false
  /** Prior P(tampering) of a peer (default 0.01). */
  readonly prior?: number
  /** Posterior at which a peer is excluded (default 0.99). */
  readonly bound?: number
  /**
   * A public seed: canaries anyone with the code and model can regenerate (tests, benchmarks).
   * Without it the canaries come from a secret (below): the default.
   */
  readonly seed?: number
  /**
   * The client's canary secret (≥ 16 bytes; client/verification/canaries/canary-secret.ts): every canary input, its
   * prompts, sampling and mixing draws derive from it. Default: secretFile's, else a random one
   * made for this client and kept in memory only. Never sent anywhere.
   */
  readonly secret?: Uint8Array
  /** Where the secret is kept (hex, mode 0600; made on first use). */
  readonly secretFile?: string
  /** Texts the secret canaries' prompts are cut from (default: the model samples them). */
  readonly corpus?: readonly string[]
  /**
   * Temperature the model samples canary prompts at when there is no corpus (default
   * DEFAULT_CANARY_PROMPT_TEMPERATURE): set so that the prompts' NLL under the model is about that
   * of the user's real prompts (docs/verification.md).
   */
  readonly promptTemperature?: number
  /** Canaries a secret set starts with (default 8); it doubles when a peer has been sent them all (each goes to a peer once). */
  readonly count?: number
  /** Benign drift model; the project's calibration by default. */
  readonly benign?: DriftModel
  /** Real prompts the canaries are made of (default: 4 of the built-in TinyStories-like ones). */
  readonly prompts?: readonly string[]
  /**
   * Positions per canary, so the longest decoy session (default max(256, the first generation's
   * max length), capped by the model context). Decoys copy real sessions' lengths up to this.
   */
  readonly length?: number
  /**
   * Chained forwarding: real chained steps per audit round (default 4, at most 6). Every chained
   * step's middle hops are audited, real and decoy alike; the audits go out together each round
   * (client/verification/audit-batch.ts), and a decoy's middle hops are scored when its round comes back.
   */
  readonly auditEvery?: number
  /**
   * A file (JSON, owner-only) where the client keeps its peers' canary records across runs, per
   * model id: a peer checked in an earlier run skips the start-up burst, and one convicted stays
   * excluded. Records count only under the same benign model and detector settings. A file that
   * cannot be read is left alone (logged as `trust-file-ignored`). Default: none.
   */
  readonly trustFile?: string
  /**
   * Redundancy checks (client/verification/redundancy-schedule.ts): the chance after a real relayed step that a
   * hop whose span another peer also serves gets the same decoy as that peer (default 0.01; 0: off).
   */
  readonly redundancyRate?: number
  /**
   * A first canary set of more multiply-adds than this is built in the background, between real
   * steps, and decoys start once it is done (default FIRST_BUILD_AT_ONCE_MACS, client/canary-set-store.ts;
   * 0: always). Issue 31: a 151k-vocabulary model's set held the first token 20–60 s.
   */
  readonly firstAtOnceMacs?: number
  /** With secretFile: keep the built set beside it between runs (sealed, client/canary-set-store.ts; default true). */
  readonly keepSet?: boolean
}

/** The real session the canaries mix into: its forwarding mode and max length (decoys copy them). */
export interface StepContext {
  readonly forwarding: 'relay' | 'chain'
  readonly maxLength: number
  readonly signal?: AbortSignal
  /** The real step: its session, first position and rows (decoys copy real sessions' shapes). */
  readonly sessionId?: string
  readonly startPosition?: number
  readonly rows?: number
  /**
   * A speculative step: the draft length it asked for (K, so up to K+1 rows). Decoys opened
   * meanwhile take speculative shapes and draft as many (client/verification/canary-decoy-speculative.ts).
   */
  readonly draftLength?: number
}

/** Why a peer was excluded: the canary that convicted it and the receipt it signed for it. */
export interface CanaryEvidence {
  readonly peerId: string
  readonly span: [number, number]
  readonly sessionId: string
  readonly stepId: number
  /** Position of the convicting step's first row in its decoy session. */
  readonly position: number
  /** Rows of the convicting step. */
  readonly rows?: number
  readonly drift: Drift
  readonly posterior: number
  readonly receipt?: Receipt
  /** The model the peer claimed to serve (computeModelId): verify-evidence recomputes with it. */
  readonly modelId?: string
  /** Wire dtype of the step (the receipt hashes the wire bytes; f32 ones are the rows below). */
  readonly wire?: string
  /** The KV cache dtype the peer announced: the benign drift class it was scored in. */
  readonly kvDtype?: string
  /**
   * The canary's input rows at the span start, positions [0, position + rows): the step's own
   * rows last, the KV context before them (client/verification/evidence.ts recomputes the span over them).
   */
  readonly input?: Float32Array
  /** The peer's answer to the step, rows [position, position + rows) at the span end. */
  readonly output?: Float32Array
}

export interface CanaryPeerReport extends PeerVerdict {
  readonly canariesSent: number
  readonly lastDrift?: Drift
}

/** What the client gives its canary monitor (client/verification/canary-monitor.ts) besides the SDK options. */
export interface CanaryMonitorOptions extends CanaryOptions {
  wireDtype: DType
  maxLength: number
  kernels?: Kernels
  log?: (e: Record<string, unknown>) => void
  /** A canary bank (a thin client's canaries): no canary is built on the client. */
  bank?: CanaryTraces
  /** Progress of building a canary set: (boundary, canaries built, canaries in the set). */
  onBuild?: (boundary: number, built: number, total: number) => void
  /** The client's embeddings and first blocks: speculative decoys' rejected drafts run through them (and canary builds). */
  edge?: Edge
  /** The client's tokenizer: canary builds use it rather than making their own (issue 31). */
  tokenizer?: Tokenizer
  first?: Shard
  /** Peers serving exactly [start, end) that routes may use: partners for redundancy checks. */
  peersOf?: (start: number, end: number) => readonly HopTarget[]
}
