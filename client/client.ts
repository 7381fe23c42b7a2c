import { randomUUID } from 'node:crypto'
import type { AbortOptions } from '@libp2p/interface'
import { createHost, type Host } from '../protocol/index.js'
import {
  type BlockPipeline,
  computeModelId,
  createEdge,
  createShard,
  createTokenizer,
  type Edge,
  generateTokens,
  InvalidArgumentError,
  type Kernels,
  type KvDType,
  type ModelFile,
  openModelFile,
  type SamplerOptions,
  type Shard,
  selectKernelsFor,
  type Tokenizer
} from '../shards/index.js'
import { type CanaryEvidence, CanaryMonitor, type CanaryOptions, type CanaryPeerReport } from './canary-monitor.js'
import { bundledModelPath } from './default-model.js'
import type { HopTarget } from './hop.js'
import {
  DEFAULT_BAN_MS,
  DEFAULT_EDGE_FIRST,
  DEFAULT_EDGE_KV_DTYPE,
  DEFAULT_EDGE_LAST,
  DEFAULT_MAX_FAILOVERS,
  DEFAULT_MAX_TOKENS,
  DEFAULT_ROUTE_TIMEOUT_MS,
  DEFAULT_STEP_TIMEOUT_MS,
  DEFAULT_WIRE
} from './options.js'
import type { ReceiptSummary } from './receipts.js'
import { CONVICTED_BAN_MS, type Forwarding, RemotePipeline } from './remote-pipeline.js'
import type { ReplayEvidence } from './replay-index.js'
import { type RollbackRecord, type StreamEvent, VerifiedStreamNeedsCanariesError } from './rollback.js'
import { type PeerRecord, SwarmView } from './swarm-view.js'
import { clearPeers, isCleared } from './verified-clear.js'
import { type Attempt, verifiedTokens } from './verified-stream.js'
import { WireLedger, type WireReport } from './wire-ledger.js'
import type { WirePreference } from './wire-negotiation.js'

export interface ClientInit {
  /** Multiaddrs (with /p2p/<id>) of swarm peers to join through. */
  readonly bootstrap: readonly string[]
  /**
   * The model file: the client runs its edge parts and checks peers serve the same model id
   * (default: the bundled stories260K.gguf, as the CLI's).
   */
  readonly model?: string
  readonly tokenizer?: string
  /** Blocks the client runs itself before / after the remote span (default 1 and 1). */
  readonly edgeFirst?: number
  readonly edgeLast?: number
  readonly forwarding?: Forwarding
  /**
   * Activation dtype on the wire: 'auto' (per hop, f16 where accepted — client/wire.ts) or one
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
  /** Canary verification (DESIGN.md §5); on by default at 3 % of steps; false turns it off. */
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
  /** Streams hold tokens until their peers have cleared (GenerateOptions.verifiedStream); default off. */
  readonly verifiedStream?: boolean
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
}

const EMPTY_RECEIPTS: ReceiptSummary = { checked: 0, invalid: 0, byPeer: {} }

function mergeReceipts(a: ReceiptSummary, b?: ReceiptSummary): ReceiptSummary {
  if (!b) return a
  const byPeer: Record<string, { checked: number; invalid: number }> = { ...a.byPeer }
  for (const [id, s] of Object.entries(b.byPeer)) {
    const t = byPeer[id] ?? { checked: 0, invalid: 0 }
    byPeer[id] = { checked: t.checked + s.checked, invalid: t.invalid + s.invalid }
  }
  return { checked: a.checked + b.checked, invalid: a.invalid + b.invalid, byPeer }
}

/** Local blocks, then the remote span, then local blocks: one session's whole model. */
function composePipeline(
  first: Shard | undefined,
  remote: RemotePipeline,
  last: Shard | undefined,
  sessionId: string,
  maxLength: number
): BlockPipeline {
  for (const s of [first, last]) s?.openSession(sessionId, { maxLength })
  return {
    async forward(hidden, startPos, options) {
      let h = first ? first.forward(sessionId, hidden, startPos) : hidden
      // the peers compute next: free the cores this client's kernel threads would spin on
      first?.rest()
      last?.rest()
      h = await remote.forward(h, startPos, options)
      return last ? last.forward(sessionId, h, startPos) : h
    },
    async close() {
      for (const s of [first, last]) s?.closeSession(sessionId)
      await remote.close()
    }
  }
}

/**
 * The layerswarm SDK. The client keeps the tokenizer, embeddings, the first `edgeFirst` and
 * last `edgeLast` blocks and the head, so peers only ever see hidden states.
 */
export class LayerswarmClient {
  readonly view: SwarmView
  readonly modelId: string
  readonly tokenizer: Tokenizer
  private readonly edge: Edge
  private readonly first?: Shard
  private readonly last?: Shard
  private readonly ownKernels?: Kernels
  private canaries?: CanaryMonitor
  readonly span: { first: [number, number]; remote: [number, number]; last: [number, number] }

  private constructor(
    readonly host: Host,
    private readonly model: ModelFile,
    private readonly init: ClientInit
  ) {
    const n = model.config.nLayers
    const k = init.edgeFirst ?? DEFAULT_EDGE_FIRST
    const j = init.edgeLast ?? DEFAULT_EDGE_LAST
    if (!Number.isInteger(k) || !Number.isInteger(j) || k < 0 || j < 0 || k + j >= n) {
      throw new InvalidArgumentError(
        `edgeFirst ${k} + edgeLast ${j} must leave at least one of the model's ${n} blocks to the swarm`
      )
    }
    if (!model.vocabulary) throw new InvalidArgumentError(`${model.path} holds no tokenizer; pass tokenizer`)
    this.tokenizer = createTokenizer(model.vocabulary)
    if (!init.kernels) this.ownKernels = selectKernelsFor(model.config, { kind: 'auto' })
    const kernels = init.kernels ?? this.ownKernels
    this.edge = createEdge({ model, kernels })
    const kvDType = init.kvDType ?? DEFAULT_EDGE_KV_DTYPE
    if (k > 0) this.first = createShard({ model, start: 0, end: k, kernels, kvDType })
    if (j > 0) this.last = createShard({ model, start: n - j, end: n, kernels, kvDType })
    this.span = { first: [0, k], remote: [k, n - j], last: [n - j, n] }
    this.modelId = computeModelId(model)
    this.view = new SwarmView(host, this.modelId, init.bootstrap)
  }

  static async create(init: ClientInit, options: AbortOptions = {}): Promise<LayerswarmClient> {
    const model = openModelFile(
      init.model ?? bundledModelPath(),
      init.tokenizer !== undefined ? { tokenizerPath: init.tokenizer } : {}
    )
    let host: Host
    try {
      host = await createHost({ listen: [], bootstrap: [...init.bootstrap] }, options)
    } catch (err) {
      model.close()
      throw err
    }
    try {
      return new LayerswarmClient(host, model, init)
    } catch (err) {
      await host.stop()
      model.close()
      throw err
    }
  }

  /**
   * A client over a host and an opened model its caller made (the browser entry: a WebSockets
   * host and a model whose edge tensors were fetched with HTTP range requests). Closing the
   * client stops the host and closes the model.
   */
  static fromModel(host: Host, model: ModelFile, init: ClientInit): LayerswarmClient {
    return new LayerswarmClient(host, model, init)
  }

  /** Tokens of context the model holds (prompt and completion together). */
  get contextLength(): number {
    return this.model.config.seqLen
  }

  /** Who serves what (refreshed now). */
  async swarm(options: AbortOptions = {}): Promise<PeerRecord[]> {
    await this.view.refresh(options)
    return this.view.list()
  }

  /**
   * Generate a completion; resolves with the tokens, text and the verification report. Only
   * honest text: tokens a convicted peer took part in are recomputed first (client/verified-stream.ts).
   */
  async generate(prompt: string, options: GenerateOptions = {}): Promise<GenerateResult> {
    const it = this.stream(prompt, options)
    let r = await it.next()
    while (!r.done) r = await it.next()
    return r.value
  }

  /**
   * Yields each token with its text as it is generated, and a `rollback` event when tokens
   * already yielded are replaced after a conviction (with verifiedStream, tokens wait until
   * their peers have cleared, so shown ones are rolled back only on a late conviction); returns
   * the full, honest result.
   */
  async *stream(prompt: string, options: GenerateOptions = {}): AsyncGenerator<StreamEvent, GenerateResult> {
    const promptTokens = this.tokenizer.encode(prompt, { special: options.special ?? false })
    const seqLen = this.model.config.seqLen
    const maxTokens = Math.max(0, Math.min(options.maxTokens ?? DEFAULT_MAX_TOKENS, seqLen - promptTokens.length))
    const maxLength = Math.min(seqLen, promptTokens.length + maxTokens)
    const forwarding = options.forwarding ?? this.init.forwarding ?? 'relay'
    this.canaries ??=
      this.init.canaries === false
        ? undefined
        : new CanaryMonitor(this.host, this.model, this.modelId, {
            ...this.init.canaries,
            wireDtype: 'f32', // decoys use each hop's negotiated dtype; this is for hops without one
            maxLength,
            kernels: this.init.kernels ?? this.ownKernels,
            log: this.init.log,
            onBuild: this.init.onCanaryBuild
          })
    const canaries = this.canaries
    const verified = options.verifiedStream ?? this.init.verifiedStream ?? false
    if (verified && !canaries) throw new VerifiedStreamNeedsCanariesError()
    // peers convicted in an earlier run (trust file) stay out of routes, as a new conviction would
    for (const peerId of canaries?.restoredExcluded.splice(0) ?? []) this.view.ban(peerId, CONVICTED_BAN_MS)
    const wireLedger = new WireLedger(this.span.remote[0], this.init.wireDtype ?? DEFAULT_WIRE)
    const remotes: RemotePipeline[] = []
    const open = (kept: readonly number[], remaining: number): Attempt => {
      const sessionId = randomUUID()
      const remote = this.remotePipeline(sessionId, maxLength, forwarding, wireLedger)
      remotes.push(remote)
      const pipeline = composePipeline(this.first, remote, this.last, sessionId, maxLength)
      let peers: readonly string[] = []
      const tracked: BlockPipeline = {
        async forward(hidden, startPos, signal) {
          const out = await pipeline.forward(hidden, startPos, signal)
          peers = remote.route.map((h) => h.peerId)
          return out
        },
        close: () => pipeline.close()
      }
      return {
        tokens: generateTokens({
          ...options,
          edge: this.edge,
          pipeline: tracked,
          promptTokens: [...promptTokens, ...kept],
          maxTokens: remaining,
          stopIds: this.tokenizer.stopIds
        }),
        lastStepPeers: () => peers,
        close: () => pipeline.close()
      }
    }
    const convicted = new Set<string>()
    const isConvicted = (p: string): boolean =>
      convicted.has(p) ||
      remotes.some((r) => r.convicted.includes(p)) ||
      (canaries !== undefined && (canaries.detector.verdict(p).excluded || canaries.replays.isConvicted(p)))
    const it = verifiedTokens({
      tokenizer: this.tokenizer,
      lastPromptToken: promptTokens[promptTokens.length - 1],
      maxTokens,
      open,
      isConvicted,
      hold: verified,
      ...(canaries && (options.verifyResult ?? true)
        ? {
            isCleared: (p: string) => isCleared(canaries, p),
            clear: (peers: string[]) =>
              clearPeers(canaries, remotes.at(-1)?.routes ?? [], peers, isConvicted, { forwarding, maxLength })
          }
        : {}),
      onRollback: (peers, unverifiable, record) => {
        for (const p of peers) {
          convicted.add(p)
          this.view.ban(p, CONVICTED_BAN_MS)
        }
        for (const p of unverifiable) this.view.ban(p, this.init.banMs ?? 60_000)
        this.init.log?.({ event: 'rollback', ...record })
      }
    })
    let r = await it.next()
    while (!r.done) {
      yield r.value
      r = await it.next()
    }
    const { tokens, rollbacks } = r.value
    for (const remote of remotes) for (const p of remote.convicted) convicted.add(p)
    const routes = remotes.flatMap((remote) =>
      remote.routes.map((route: HopTarget[]) => route.map(({ peerId, start, end }) => ({ peerId, start, end })))
    )
    const receipts = remotes.reduce(
      (acc, remote) => mergeReceipts(acc, remote.receipts.summary()),
      canaries?.receipts.summary() ?? EMPTY_RECEIPTS
    )
    return {
      promptTokens,
      tokens,
      text: this.tokenizer.decode(tokens),
      report: {
        routes,
        failovers: remotes.reduce((n, remote) => n + remote.failovers, 0),
        excludedPeers: this.view.bannedPeers(),
        edge: { first: this.span.first, last: this.span.last },
        forwarding,
        receipts,
        canaries: canaries?.report() ?? [],
        evidence: [...(canaries?.evidence ?? [])],
        replays: [...(canaries?.replays.evidence ?? [])],
        reruns: rollbacks.length,
        rollbacks,
        wire: wireLedger.report()
      },
      convicted: [...convicted]
    }
  }

  private remotePipeline(sessionId: string, maxLength: number, forwarding: Forwarding, wireLedger: WireLedger): RemotePipeline {
    return new RemotePipeline({
      host: this.host,
      view: this.view,
      modelId: this.modelId,
      dim: this.model.config.dim,
      from: this.span.remote[0],
      to: this.span.remote[1],
      sessionId,
      maxLength,
      forwarding,
      wireDtype: this.init.wireDtype ?? DEFAULT_WIRE,
      wireLedger,
      stepTimeoutMs: this.init.stepTimeoutMs ?? DEFAULT_STEP_TIMEOUT_MS,
      banMs: this.init.banMs ?? DEFAULT_BAN_MS,
      maxFailovers: this.init.maxFailovers ?? DEFAULT_MAX_FAILOVERS,
      routeTimeoutMs: this.init.routeTimeoutMs ?? DEFAULT_ROUTE_TIMEOUT_MS,
      log: this.init.log,
      canaries: this.canaries,
      snapshotEvery: this.init.snapshotEvery,
      standby: this.init.standby
    })
  }

  async close(): Promise<void> {
    await this.canaries?.close()
    await this.host.stop()
    this.ownKernels?.close?.()
    this.model.close()
  }
}

export async function createClient(init: ClientInit, options: AbortOptions = {}): Promise<LayerswarmClient> {
  return await LayerswarmClient.create(init, options)
}
