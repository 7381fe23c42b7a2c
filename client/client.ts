import { randomUUID } from 'node:crypto'
import { createHost, type Host } from '../protocol/index.js'
import {
  type BlockPipeline,
  computeModelId,
  createEdge,
  createShard,
  createTokenizer,
  DEFAULT_KV_DTYPE,
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
import type { HopTarget } from './hop.js'
import type { ReceiptSummary } from './receipts.js'
import { CONVICTED_BAN_MS, type Forwarding, RemotePipeline } from './remote-pipeline.js'
import type { ReplayEvidence } from './replay-index.js'
import { type PeerRecord, SwarmView } from './swarm-view.js'
import { WireLedger, type WireReport } from './wire-ledger.js'
import type { WirePreference } from './wire-negotiation.js'

export interface ClientInit {
  /** Multiaddrs (with /p2p/<id>) of swarm peers to join through. */
  readonly bootstrap: readonly string[]
  /** The model file: the client runs its edge parts and checks peers serve the same model id. */
  readonly model: string
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
  /** KV cache storage of the client's own edge blocks (default f16, as nodes). */
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
}

export interface GenerateOptions extends SamplerOptions {
  readonly maxTokens?: number
  readonly signal?: AbortSignal
  readonly forwarding?: Forwarding
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
  /** Times the generation was re-run because a peer of its route was convicted meanwhile. */
  readonly reruns: number
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
    async forward(hidden, startPos, signal) {
      let h = first ? first.forward(sessionId, hidden, startPos) : hidden
      // the peers compute next: free the cores this client's kernel threads would spin on
      first?.rest()
      last?.rest()
      h = await remote.forward(h, startPos, signal)
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
    const k = init.edgeFirst ?? 1
    const j = init.edgeLast ?? 1
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
    const kvDType = init.kvDType ?? DEFAULT_KV_DTYPE
    if (k > 0) this.first = createShard({ model, start: 0, end: k, kernels, kvDType })
    if (j > 0) this.last = createShard({ model, start: n - j, end: n, kernels, kvDType })
    this.span = { first: [0, k], remote: [k, n - j], last: [n - j, n] }
    this.modelId = computeModelId(model)
    this.view = new SwarmView(host, this.modelId, init.bootstrap)
  }

  static async create(init: ClientInit): Promise<LayerswarmClient> {
    const model = openModelFile(init.model, init.tokenizer !== undefined ? { tokenizerPath: init.tokenizer } : {})
    const host = await createHost({ listen: [], bootstrap: [...init.bootstrap] })
    try {
      return new LayerswarmClient(host, model, init)
    } catch (err) {
      await host.stop()
      model.close()
      throw err
    }
  }

  /** Who serves what (refreshed now). */
  async swarm(signal?: AbortSignal): Promise<PeerRecord[]> {
    await this.view.refresh(signal)
    return this.view.list()
  }

  /** Generate a completion; resolves with the tokens, text and the verification report. */
  async generate(prompt: string, options: GenerateOptions = {}): Promise<GenerateResult> {
    // A peer convicted mid-generation may have shaped the tokens so far: re-run the whole
    // session on a route without it (convicted peers stay excluded), a bounded number of times.
    let reruns = 0
    for (;;) {
      const it = this.stream(prompt, options)
      let r = await it.next()
      while (!r.done) r = await it.next()
      if (r.value.convicted.length === 0 || reruns >= 2) return { ...r.value, report: { ...r.value.report, reruns } }
      reruns++
      this.init.log?.({ event: 'rerun', why: `peers convicted by canaries or receipts: ${r.value.convicted.join(', ')}` })
    }
  }

  /** Yields each token with its text as it is generated; returns the full result. */
  async *stream(prompt: string, options: GenerateOptions = {}): AsyncGenerator<{ token: number; text: string }, GenerateResult> {
    const promptTokens = this.tokenizer.encode(prompt, { special: options.special ?? false })
    const seqLen = this.model.config.seqLen
    const maxTokens = Math.max(0, Math.min(options.maxTokens ?? 256, seqLen - promptTokens.length))
    const maxLength = Math.min(seqLen, promptTokens.length + maxTokens)
    const sessionId = randomUUID()
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
    // peers convicted in an earlier run (trust file) stay out of routes, as a new conviction would
    for (const peerId of this.canaries?.restoredExcluded.splice(0) ?? []) this.view.ban(peerId, CONVICTED_BAN_MS)
    const wireLedger = new WireLedger(this.span.remote[0], this.init.wireDtype ?? 'f32')
    const remote = new RemotePipeline({
      host: this.host,
      view: this.view,
      modelId: this.modelId,
      dim: this.model.config.dim,
      from: this.span.remote[0],
      to: this.span.remote[1],
      sessionId,
      maxLength,
      forwarding,
      wireDtype: this.init.wireDtype ?? 'f32',
      wireLedger,
      stepTimeoutMs: this.init.stepTimeoutMs ?? 10_000,
      banMs: this.init.banMs ?? 60_000,
      maxFailovers: this.init.maxFailovers ?? 3,
      routeTimeoutMs: this.init.routeTimeoutMs ?? 10_000,
      log: this.init.log,
      canaries: this.canaries,
      snapshotEvery: this.init.snapshotEvery,
      standby: this.init.standby
    })
    const pipeline = composePipeline(this.first, remote, this.last, sessionId, maxLength)
    const decoder = this.tokenizer.createDecoder()
    const generated: number[] = []
    let prev = promptTokens[promptTokens.length - 1]
    try {
      for await (const token of generateTokens({
        ...options,
        edge: this.edge,
        pipeline,
        promptTokens,
        maxTokens,
        stopIds: this.tokenizer.stopIds
      })) {
        generated.push(token)
        yield { token, text: decoder.push(token, prev) }
        prev = token
      }
    } finally {
      await pipeline.close()
    }
    const routes = remote.routes.map((r: HopTarget[]) => r.map(({ peerId, start, end }) => ({ peerId, start, end })))
    return {
      promptTokens,
      tokens: generated,
      text: this.tokenizer.decode(generated),
      report: {
        routes,
        failovers: remote.failovers,
        excludedPeers: this.view.bannedPeers(),
        edge: { first: this.span.first, last: this.span.last },
        forwarding,
        receipts: mergeReceipts(remote.receipts.summary(), this.canaries?.receipts.summary()),
        canaries: this.canaries?.report() ?? [],
        evidence: [...(this.canaries?.evidence ?? [])],
        replays: [...(this.canaries?.replays.evidence ?? [])],
        reruns: 0,
        wire: wireLedger.report()
      },
      convicted: [...remote.convicted]
    }
  }

  async close(): Promise<void> {
    await this.canaries?.close()
    await this.host.stop()
    this.ownKernels?.close?.()
    this.model.close()
  }
}

export async function createClient(init: ClientInit): Promise<LayerswarmClient> {
  return await LayerswarmClient.create(init)
}
