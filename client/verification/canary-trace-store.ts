import type { AbortOptions } from '@libp2p/interface'
import {
  buildCanaryTraces,
  CanaryBankLevelError,
  type CanarySet,
  type CanaryTraces,
  canarySetFromTraces,
  DEFAULT_CANARY_LENGTH,
  DEFAULT_CANARY_PROMPTS,
  extendCanaryTraces,
  extendCanaryTracesInSlices,
  MAX_CANARY_PROMPT_TOKENS
} from '../../canary/index.js'
import { createReferenceKernels, type Kernels, type ModelFile } from '../../shards/index.js'
import { PromptHistory, type PromptsFromContext, secretPromptsFollowing } from './canary-template.js'

/**
 * A growth projected to take longer than this runs in slices between the client's real steps
 * (CanaryTraceStore `inSlices`): a new client's secret set grows twice in its start-up burst, and
 * on a 110m model each growth held a real generation for tens of seconds when built at once.
 */
export const BACKGROUND_BUILD_MS = 1000

export interface CanaryTraceStoreOptions {
  readonly kernels?: Kernels
  readonly prompts?: readonly string[]
  /**
   * Made on first use when `prompts` is not given (secret canaries: client/verification/canary-secret.ts):
   * prompts `from` to `count` of the secret set (prompt i is fixed by the secret and i, and
   * by the openings observed when it is made), so the set grows by new ones.
   */
  readonly promptsFrom?: (count: number, more: PromptsFromContext) => readonly string[]
  /** Canaries the secret set starts with (default 8); doubled when a peer has seen them all. */
  readonly count?: number
  readonly seed?: number
  /**
   * A canary bank (canary/canary-bank.ts): traces built elsewhere, so the client never runs
   * the blocks it does not hold (a thin client). Its canaries' length sets `length`.
   */
  readonly bank?: CanaryTraces
  /** Positions per canary (default max(256, maxLength), capped by the context). */
  readonly length?: number
  readonly maxLength: number
  /**
   * Growing a built set by more canaries, when projected to take over BACKGROUND_BUILD_MS, runs
   * in slices with the event loop going on (the set built so far serves meanwhile); the first
   * build and longer canaries (a longer session starting) are at once. Off by default (tests
   * that plan decoys back to back).
   */
  readonly inSlices?: boolean
  /** The projected time over which a build goes in slices (default BACKGROUND_BUILD_MS; 0: every growth). */
  readonly inSlicesOverMs?: number
  readonly onBuild?: (boundary: number, built: number, total: number) => void
  /** A build in slices failed (the set built so far goes on serving). */
  readonly onBuildError?: (err: Error) => void
}

/**
 * The traces decoys are cut from (one set of traces, built on the client's own trusted kernels and
 * kept in memory only), their secret prompts, and how they grow: longer when a real session
 * outgrows them, more canaries when a peer has seen them all.
 */
export class CanaryTraceStore {
  private traces?: CanaryTraces
  private prompts?: readonly string[]
  private readonly sets = new Map<number, CanarySet>()
  /** Positions per canary at most: as long as the longest real session expected. */
  readonly length: number
  /**
   * Positions the traces are built to: with the default length, the longest real session seen so
   * far (setFor's `maxLength`), not `length` up front. A decoy copies a real session's shape, so
   * it never runs past the longest real session; positions beyond it cost whole-model decode
   * steps on the client (minutes per canary on an 8B model) and were never sent.
   */
  private wanted: number
  /** Canaries of the secret set (grown when a peer has been sent every one). */
  private count: number
  /** The client's real prompts as secret canaries follow them (openings, chat templates). */
  readonly history = new PromptHistory()
  /** Per prompt of `prompts`: made by a chat template (then kept whole; `special`: control tokens). */
  readonly templated: ({ special: boolean } | undefined)[] = []
  /** A build in slices under way. */
  private building?: Promise<void>
  /** Milliseconds per canary position of the last build (projects the next one's time). */
  private msPerPosition?: number
  private readonly stop = new AbortController()

  constructor(
    private readonly model: ModelFile,
    private readonly o: CanaryTraceStoreOptions
  ) {
    const seqLen = model.config.seqLen
    this.length = o.bank
      ? Math.min(...o.bank.traces.map((t) => t.tokens.length))
      : Math.min(seqLen, o.length ?? Math.max(DEFAULT_CANARY_LENGTH, o.maxLength))
    // an explicit length (or a bank) is built as given; the default grows with real sessions
    this.wanted = o.bank || o.length !== undefined ? this.length : 0
    if (o.bank) this.traces = o.bank
    this.count = o.count ?? 8
  }

  /** Positions every canary has now. */
  private get built(): number {
    return this.traces ? Math.min(...this.traces.traces.map((t) => t.tokens.length)) : 0
  }

  /** Canaries made (prompts) but not yet built (a growth in slices under way). */
  get pending(): boolean {
    return this.building !== undefined || this.missing()
  }

  private missing(): boolean {
    const t = this.traces
    return !this.o.bank && t !== undefined && ((this.prompts?.length ?? 0) > t.traces.length || this.built < this.wanted)
  }

  /**
   * Canary inputs at a boundary, with references for every span end after it. The traces keep the
   * states from the first boundary asked for on (a route's hops all start at or after it); one
   * before it rebuilds them. `maxLength`: a real session's (prompt plus completion), so that the
   * canaries are at least that long (capped by `length`); the traces grow longer when a real
   * session outgrows them, each continued from where it stopped (the same tokens and states at
   * the positions built before), so a decoy in progress continues on the same canary.
   */
  setFor(boundary: number, maxLength?: number): CanarySet {
    const want = Math.min(this.length, Math.max(2, maxLength ?? (this.wanted || this.length)))
    const built = this.built
    // grows at least twofold, so a client whose sessions keep getting longer grows few times
    if (want > this.wanted) this.wanted = built > 0 && want > built ? Math.min(this.length, Math.max(want, 2 * built)) : want
    if (this.o.bank?.traces.some((t) => t.states[boundary] === undefined)) {
      throw new CanaryBankLevelError(`the canary bank holds no states at block boundary ${boundary}: rebuild it with that level`)
    }
    const traces = this.traces
    if (!traces || traces.traces[0].states[boundary] === undefined) this.buildAll(boundary, traces)
    else if (this.missing()) this.extend(boundary)
    let set = this.sets.get(boundary)
    if (!set) {
      const n = this.model.config.nLayers
      const t = this.traces! // built above when there were none
      set = canarySetFromTraces(
        t,
        boundary,
        Array.from({ length: n - boundary }, (_, i) => boundary + i + 1)
      )
      this.sets.set(boundary, set)
    }
    return set
  }

  /** Twice as many secret canaries (built on the next setFor); false when the set cannot grow. */
  grow(): boolean {
    if (this.o.bank || this.o.prompts || !this.o.promptsFrom || !this.prompts) return false
    const from = this.count
    this.count *= 2
    this.prompts = [...this.prompts, ...(this.secretPrompts(from) ?? [])]
    return true
  }

  /** The build in slices under way, if any, done (tests, benchmarks; a client never waits for it). */
  async settled({ signal }: AbortOptions = {}): Promise<void> {
    while (this.building) {
      signal?.throwIfAborted()
      const building = this.building
      await new Promise<void>((resolve, reject) => {
        const stop = (): void => reject(signal?.reason)
        signal?.addEventListener('abort', stop, { once: true })
        building.finally(() => signal?.removeEventListener('abort', stop)).then(resolve, resolve)
      })
    }
  }

  /** Stop a build in slices (the client is closing). */
  close(): void {
    this.stop.abort()
  }

  /**
   * Every canary again, with levels from the lowest boundary asked for so far. Building runs the
   * whole model over every canary (in lockstep, canary/trace.ts), token by token (sampled
   * continuation), so the default set is small; a longer-lived client can pass more prompts.
   */
  private buildAll(boundary: number, traces: CanaryTraces | undefined): void {
    const n = this.model.config.nLayers
    const from = Math.min(boundary, traces ? traces.traces[0].states.findIndex((s) => s !== undefined) : n)
    const prompts = this.o.prompts ?? (this.prompts ??= this.secretPrompts(0)) ?? DEFAULT_CANARY_PROMPTS.slice(0, 4)
    const t0 = performance.now()
    this.adopt(
      buildCanaryTraces({
        model: this.model,
        kernels: this.o.kernels ?? createReferenceKernels(),
        prompts,
        templated: this.templated,
        tokensPerPrompt: this.wanted,
        maxPromptTokens: Math.min(MAX_CANARY_PROMPT_TOKENS, this.wanted),
        seed: this.o.seed ?? 1,
        levels: Array.from({ length: n + 1 - from }, (_, i) => from + i),
        onProgress: (done, total) => this.o.onBuild?.(boundary, done, total)
      }),
      prompts.length * this.wanted,
      t0
    )
  }

  /**
   * The new canaries and the positions past the built ones (extendCanaryTraces): at once, or (new
   * canaries only) in slices when that is projected to take long, the traces built so far serving
   * meanwhile.
   */
  private extend(boundary: number): void {
    if (this.building) return
    const traces = this.traces!
    const prompts = this.prompts ?? this.o.prompts ?? traces.traces.map((t) => t.text)
    const options = {
      model: this.model,
      kernels: this.o.kernels ?? createReferenceKernels(),
      prompts,
      templated: this.templated,
      tokensPerPrompt: this.wanted,
      seed: this.o.seed ?? 1,
      onProgress: (done: number, total: number) => this.o.onBuild?.(boundary, done, total)
    }
    const work = (prompts.length - traces.traces.length) * this.wanted + traces.traces.length * (this.wanted - this.built)
    const t0 = performance.now()
    // Longer canaries are for the session starting now (its first step asked), as a first build
    // is: at once. Built in slices, they held every token of that session back instead (a
    // returning client's 256-token generation on a 110m swarm: 8–10 tok/s, not ~65).
    const longer = this.built < this.wanted
    const over = (this.msPerPosition ?? 0) * work > (this.o.inSlicesOverMs ?? BACKGROUND_BUILD_MS)
    if (!this.o.inSlices || longer || !over) {
      this.adopt(extendCanaryTraces(traces, options), work, t0)
      return
    }
    this.building = extendCanaryTracesInSlices(traces, options, { signal: this.stop.signal })
      .then((grown) => {
        // a build at once in the meantime (a lower boundary) made these stale
        if (this.traces === traces) this.adopt(grown)
      })
      .catch((err: Error) => {
        if (!this.stop.signal.aborted) this.o.onBuildError?.(err)
      })
      .finally(() => {
        this.building = undefined
      })
  }

  /** Serve `traces` from now on; `work` positions built at once since `t0` set the projection. */
  private adopt(traces: CanaryTraces, work?: number, t0?: number): void {
    if (work !== undefined && t0 !== undefined && work > 0) this.msPerPosition = (performance.now() - t0) / work
    this.traces = traces
    this.sets.clear()
  }

  /** Secret prompts `from` to `count` (client/verification/canary-template.ts), fixed from then on. */
  private secretPrompts(from: number): string[] | undefined {
    if (!this.o.promptsFrom) return undefined
    const made = secretPromptsFollowing(this.history, this.model, this.o.promptsFrom, {
      count: this.count,
      from,
      seed: this.o.seed ?? 1
    })
    made.templated.forEach((t, k) => {
      this.templated[from + k] = t
    })
    return made.texts
  }
}
