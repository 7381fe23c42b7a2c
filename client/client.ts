import { randomUUID } from 'node:crypto'
import type { AbortOptions } from '@libp2p/interface'
import type { CanaryTraces } from '../canary/index.js'
import type { Host } from '../protocol/index.js'
import {
  compileSchema,
  computeModelId,
  createConstraint,
  createEdge,
  createShard,
  createTokenizer,
  type Edge,
  type HeadRows,
  InvalidArgumentError,
  type Kernels,
  type ModelFile,
  type Shard,
  selectKernelsFor,
  type Tokenizer
} from '../shards/index.js'
import { openClientResources } from './client-resources.js'
import type { ClientInit, GenerateOptions, GenerateResult } from './client-types.js'
import { type ClientParts, clientCanaryMonitor, clientRemotePipeline } from './client-wiring.js'
import { VerifiedStreamNeedsCanariesError } from './errors.js'
import { headMemory, headStatsOf, lowDimensionalHead, RemoteHead, remoteHeadTokens } from './head/index.js'
import {
  CONVICTED_BAN_MS,
  DEFAULT_BAN_MS,
  DEFAULT_EDGE_FIRST,
  DEFAULT_EDGE_KV_DTYPE,
  DEFAULT_EDGE_LAST,
  DEFAULT_MAX_TOKENS,
  DEFAULT_SPECULATE,
  DEFAULT_WIRE
} from './options.js'
import { type PeerRecord, SwarmView } from './routing/swarm-view.js'
import { composePipeline, trackLastStepPeers } from './session/edge-pipeline.js'
import { generateResult } from './session/generate-result.js'
import { HeadChannel } from './session/head-channel.js'
import type { RemotePipeline } from './session/remote-pipeline.js'
import type { StreamEvent } from './session/rollback.js'
import { clearPeers, isCleared } from './session/verified-clear.js'
import { type Attempt, verifiedTokens } from './session/verified-stream.js'
import { WireLedger } from './session/wire-ledger.js'
import type { DraftModel } from './speculation/draft-model.js'
import { decodeTokens, parseSpeculate } from './speculation/speculation.js'
import { emptySpeculationStats } from './speculation/speculative-decode.js'
import { openCanaryBank } from './verification/canaries/canary-bank-init.js'
import type { CanaryMonitor } from './verification/canary-monitor.js'
import type { FetchedWeights } from './weights/client-fetch.js'
import type { Seeder } from './weights/seeder.js'

export type { ClientInit, GenerateOptions, GenerateResult, VerificationReport } from './client-types.js'

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
  private readonly draftModels = new Map<string, DraftModel>()
  private readonly bank?: CanaryTraces
  private headRows?: HeadRows
  readonly span: { first: [number, number]; remote: [number, number]; last: [number, number] }

  private constructor(
    readonly host: Host,
    private readonly model: ModelFile,
    private readonly init: ClientInit,
    /** Issue 33: what a client started by content id fetched (undefined for a local file). */
    readonly fetchedWeights?: FetchedWeights,
    /** Issue #35 item 4: the head rows a thin client holds (its fetched head chunks); every row by default. */
    private readonly headReadable?: (id: number) => boolean,
    /** Issue 33: serves what the client fetched to other peers (`seedWeights`). */
    readonly seeder?: Seeder
  ) {
    const n = model.config.nLayers
    const k = init.edgeFirst ?? DEFAULT_EDGE_FIRST
    if (init.head === 'remote' && (init.edgeLast ?? 0) !== 0)
      throw new InvalidArgumentError(
        `head 'remote' runs the head on the last block's peer: edgeLast must be 0, not ${init.edgeLast}`
      )
    const j = init.head === 'remote' ? 0 : (init.edgeLast ?? DEFAULT_EDGE_LAST)
    if (!Number.isInteger(k) || !Number.isInteger(j) || k < 0 || j < 0 || k + j >= n) {
      throw new InvalidArgumentError(
        `edgeFirst ${k} + edgeLast ${j} must leave at least one of the model's ${n} blocks to the swarm`
      )
    }
    if (!model.vocabulary) throw new InvalidArgumentError(`${model.path} holds no tokenizer; pass tokenizer`)
    this.tokenizer = createTokenizer(model.vocabulary)
    if (!init.kernels) this.ownKernels = selectKernelsFor(model.config, { kind: 'auto' })
    const kernels = init.kernels ?? this.ownKernels
    this.edge = createEdge({ model, kernels, lazyHead: init.head === 'remote' })
    const kvDType = init.kvDType ?? DEFAULT_EDGE_KV_DTYPE
    if (k > 0) this.first = createShard({ model, start: 0, end: k, kernels, kvDType })
    if (j > 0) this.last = createShard({ model, start: n - j, end: n, kernels, kvDType })
    this.span = { first: [0, k], remote: [k, n - j], last: [n - j, n] }
    this.modelId = fetchedWeights?.legacyModelId ?? computeModelId(model)
    if (init.canaryBank) this.bank = openCanaryBank(init.canaryBank, this.modelId)
    this.view = new SwarmView(host, this.modelId, init.bootstrap)
  }

  static async create(init: ClientInit, options: AbortOptions = {}): Promise<LayerswarmClient> {
    const { host, model, fetched, privateKey, headReadable, seeder } = await openClientResources(init, options)
    try {
      return new LayerswarmClient(host, model, { ...init, privateKey }, fetched, headReadable, seeder)
    } catch (err) {
      await seeder?.stop()
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
  static fromModel(host: Host, model: ModelFile, init: ClientInit, headReadable?: (id: number) => boolean): LayerswarmClient {
    return new LayerswarmClient(host, model, init, undefined, headReadable)
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
   * honest text: tokens a convicted peer took part in are recomputed first (client/session/verified-stream.ts).
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
    this.canaries ??= clientCanaryMonitor(this.parts(), maxLength)
    const canaries = this.canaries
    canaries?.observePrompt(promptTokens, this.tokenizer.bosId, { special: options.special, template: options.promptTemplate })
    const verified = options.verifiedStream ?? this.init.verifiedStream ?? false
    if (verified && !canaries) throw new VerifiedStreamNeedsCanariesError()
    // peers convicted in an earlier run (trust file) stay out of routes, as a new conviction would
    for (const peerId of canaries?.restoredExcluded.splice(0) ?? []) this.view.ban(peerId, CONVICTED_BAN_MS)
    const grammar = options.grammar ?? (options.schema !== undefined ? compileSchema(options.schema) : undefined)
    const constraint = grammar && createConstraint(this.tokenizer, grammar)
    // per-token hooks see every sampled token: a speculative step samples several at once
    const perToken = constraint !== undefined || options.onSampled !== undefined
    const speculate = perToken ? 'off' : parseSpeculate(options.speculate ?? this.init.speculate ?? DEFAULT_SPECULATE)
    const speculation = emptySpeculationStats()
    const wireLedger = new WireLedger(this.span.remote[0], this.init.wireDtype ?? DEFAULT_WIRE)
    const remotes: RemotePipeline[] = []
    const heads: RemoteHead[] = []
    const open = (kept: readonly number[], remaining: number): Attempt => {
      const sessionId = randomUUID()
      const head = this.remoteHead()
      if (head) heads.push(head)
      const remote = clientRemotePipeline(this.parts(), this.canaries, {
        sessionId,
        maxLength,
        forwarding,
        wireLedger,
        head: head?.channel
      })
      remotes.push(remote)
      const pipeline = composePipeline(this.first, remote, this.last, sessionId, maxLength)
      const tracked = trackLastStepPeers(pipeline, remote)
      return {
        tokens: (head ? remoteHeadTokens.bind(null, head) : decodeTokens)(
          speculate,
          {
            ...options,
            edge: this.edge,
            pipeline: tracked.pipeline,
            promptTokens: [...promptTokens, ...kept],
            maxTokens: remaining,
            stopIds: this.tokenizer.stopIds,
            // after a rollback the grammar restarts from the tokens kept
            constraint: constraint?.start(kept)
          },
          { ...this.draftContext(), stats: speculation }
        ),
        lastStepPeers: tracked.lastStepPeers,
        close: () => pipeline.close()
      }
    }
    const convicted = new Set<string>()
    const isConvicted = (p: string): boolean =>
      convicted.has(p) ||
      remotes.some((r) => r.convicted.includes(p)) ||
      heads.some((h) => h.isConvicted(p)) ||
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
            clear: async (peers: string[]) => {
              const routes = remotes.at(-1)?.routes ?? []
              const unchecked = await clearPeers(canaries, routes, peers, isConvicted, { forwarding, maxLength }, { wait: true })
              if (unchecked.length > 0) this.init.log?.({ event: 'canaries-pending', unchecked })
              return unchecked
            }
          }
        : {}),
      onRollback: (peers, unverifiable, record) => {
        for (const p of peers) {
          convicted.add(p)
          this.view.ban(p, CONVICTED_BAN_MS)
        }
        for (const p of unverifiable) this.view.ban(p, this.init.banMs ?? DEFAULT_BAN_MS)
        this.init.log?.({ event: 'rollback', ...record })
      }
    })
    let r = await it.next()
    while (!r.done) {
      yield r.value
      r = await it.next()
    }
    const { tokens, rollbacks } = r.value
    const result = generateResult({
      promptTokens,
      tokens,
      text: this.tokenizer.decode(tokens),
      rollbacks,
      remotes,
      canaries,
      convicted,
      view: this.view,
      edge: { first: this.span.first, last: this.span.last },
      forwarding,
      wireLedger,
      speculation
    })
    if (heads.length === 0 || !this.headRows) return result
    return { ...result, head: { ...headStatsOf(heads), memory: headMemory(this.headRows, this.model, this.edge.headBytes) } }
  }

  /** Issue #35: a fresh remote head over the client's low-dimensional head, or none with the head local. */
  private remoteHead(): RemoteHead | undefined {
    if (this.init.head !== 'remote') return undefined
    this.headRows ??= lowDimensionalHead(this.model, this.init.headSecretRows, this.headReadable)
    const { config } = this.model
    return new RemoteHead({ config, rows: this.headRows, channel: new HeadChannel(), checkDtype: this.init.headCheckDtype })
  }

  /** What the client's canary monitor and remote pipelines are made from (client/client-wiring.ts). */
  private parts(): ClientParts {
    const { host, model, modelId, init, view, edge, tokenizer, first, bank, span } = this
    const kernels = init.kernels ?? this.ownKernels
    return { host, model, modelId, init, view, edge, tokenizer, first, bank, kernels, remote: span.remote }
  }

  private draftContext() {
    const { edge, first, last, model, draftModels } = this
    return { edge, first, last, model, draftModels, kernels: this.init.kernels ?? this.ownKernels }
  }

  async close(): Promise<void> {
    await this.canaries?.close()
    await this.seeder?.stop()
    await this.host.stop()
    for (const m of this.draftModels.values()) m.close()
    this.ownKernels?.close?.()
    this.model.close()
  }
}

/**
 * Joins a swarm through its bootstrap peers and returns a client that generates across them.
 *
 * @example
 * ```ts
 * const client = await createClient({ bootstrap: ['/ip4/192.168.1.10/tcp/4001/p2p/12D3KooW…'], model: 'stories260K.gguf' })
 * const { text } = await client.generate('Once upon a time', { maxTokens: 64 })
 * await client.close()
 * ```
 */
export async function createClient(init: ClientInit, options: AbortOptions = {}): Promise<LayerswarmClient> {
  return await LayerswarmClient.create(init, options)
}
