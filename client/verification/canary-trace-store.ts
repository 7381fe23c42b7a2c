import type { AbortOptions } from '@libp2p/interface'
import {
  buildCanaryTraces,
  buildCanaryTracesJob,
  CanariesPendingError,
  CanaryBankLevelError,
  type CanarySet,
  type CanaryTraces,
  canarySetFromTraces,
  DEFAULT_BACKGROUND_SHARE,
  DEFAULT_CANARY_LENGTH,
  DEFAULT_CANARY_PROMPTS,
  extendCanaryTraces,
  extendCanaryTracesInSlices,
  extendCanaryTracesJob,
  MAX_CANARY_PROMPT_TOKENS,
  runInBackground
} from '../../canary/index.js'
import { createReferenceKernels, type ModelFile } from '../../shards/index.js'
import { FIRST_BUILD_AT_ONCE_MACS, firstBuildMacs } from './canary-set-store.js'
import { PromptHistory, secretPromptsFollowing, secretPromptsFollowingJob } from './canary-template.js'
import { BACKGROUND_BUILD_MS, type CanaryTraceStoreOptions } from './canary-trace-store-options.js'

export { BACKGROUND_BUILD_MS, type CanaryTraceStoreOptions } from './canary-trace-store-options.js'

/**
 * Canaries a slow model's background build makes at a time (issue 31): the first decoys wait for
 * this many, not the whole set, and each group is kept for the next run as soon as it is built.
 */
export const FIRST_GROUP = 2

/** Milliseconds without a real step after which a background build takes every free turn (the client is idle). */
export const IDLE_AFTER_MS = 500

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
  /** Builds go to the background (the first was projected over firstAtOnceMacs). */
  private slow = false
  /** A build in the background makes longer canaries: decoys wait for them (a real session's shape needs them). */
  lengthening = false
  /** Share of the event loop the background build takes now (raised while someone waits for it). */
  private share?: number
  /** When a real step last asked for the set (setFor): a build runs at full speed once none has for a while. */
  private lastStepMs = Number.NEGATIVE_INFINITY

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
    const kept = !o.bank && !o.prompts ? o.saved?.load() : undefined
    if (kept && kept.nLayers === model.config.nLayers && kept.dim === model.config.dim) {
      // a returning client's set: its prompts stay prompts 0..k of the secret set, and it grows from there
      this.traces = kept
      this.prompts = kept.traces.map((t) => t.text)
      this.count = Math.max(this.count, kept.traces.length)
    }
  }

  /** Positions every canary has now. */
  private get built(): number {
    return this.traces ? Math.min(...this.traces.traces.map((t) => t.tokens.length)) : 0
  }

  /** Canaries made (prompts) but not yet built (a growth in slices under way). */
  get pending(): boolean {
    return this.building !== undefined || this.missing()
  }

  /** No canary built yet, the first set building in the background. */
  get firstPending(): boolean {
    return this.traces === undefined && this.building !== undefined
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
    this.lastStepMs = performance.now()
    const want = Math.min(this.length, Math.max(2, maxLength ?? (this.wanted || this.length)))
    const built = this.built
    // grows at least twofold, so a client whose sessions keep getting longer grows few times
    if (want > this.wanted) this.wanted = built > 0 && want > built ? Math.min(this.length, Math.max(want, 2 * built)) : want
    if (this.o.bank?.traces.some((t) => t.states[boundary] === undefined)) {
      throw new CanaryBankLevelError(`the canary bank holds no states at block boundary ${boundary}: rebuild it with that level`)
    }
    const traces = this.traces
    const slow = this.inBackground()
    if (slow && !this.building && (traces?.traces.length ?? 0) < this.count) this.buildGroups(traces ? undefined : boundary)
    if (!traces) {
      if (slow) throw new CanariesPendingError('the first canaries are being built')
      this.buildAll(boundary, traces)
    } else if (traces.traces[0].states[boundary] === undefined) this.buildAll(boundary, traces)
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
    // a slow model's new canaries are made in the background, a group at a time (buildGroups)
    if (this.slow) return true
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

  /** Stop a build in slices (the client is closing): nothing waits for it. */
  close(): void {
    this.stop.abort()
  }

  /** A caller waits for the build under way: it takes every free turn from now on. */
  hurry(): void {
    this.share = 1
  }

  /** Whether a first build (none built, none kept) goes to the background: projected long, with inSlices. */
  private inBackground(): boolean {
    // secret sets only (made by promptsJob): given prompts and banks are built at once or not at all
    if (!this.o.inSlices || this.o.bank || this.o.prompts || !this.o.promptsJob) return false
    const macs = firstBuildMacs(this.model.config, this.count, Math.max(2, this.wanted), true)
    this.slow ||= macs > (this.o.firstAtOnceMacs ?? FIRST_BUILD_AT_ONCE_MACS)
    return this.slow
  }

  /**
   * A slow model's canaries (issue 31), in the background (canary/background-job.ts: between the
   * client's real steps, at a share of the event loop, so the first token and decode keep their
   * pace), FIRST_GROUP at a time: prompts, then traces, each group served (and kept: saved) as
   * soon as it is built, so decoys start after the first group, and a run that ends early still
   * leaves its groups to the next run. `first`: the boundary of a first build (its lowest level).
   */
  private buildGroups(first: number | undefined): void {
    const n = this.model.config.nLayers
    const store = this
    const job = (function* () {
      for (;;) {
        const old = store.traces
        const from = old?.traces.length ?? 0
        if (from >= store.count) return
        const to = Math.min(store.count, from + FIRST_GROUP)
        const made =
          store.prompts && store.prompts.length >= to ? store.prompts.slice(from, to) : yield* store.secretPromptsJob(from, to)
        if (!made) return
        store.prompts = [...(store.prompts ?? []).slice(0, from), ...made]
        const length = old ? store.built : Math.max(2, store.wanted)
        const lowest = old ? old.traces[0].states.findIndex((x) => x !== undefined) : (first ?? 0)
        const added = yield* buildCanaryTracesJob({
          ...store.common(lowest),
          // the whole set's progress (a progress line for whoever waits: verifiedStream), not the group's
          onProgress: (done: number) => {
            if (store.share === 1) store.o.onBuild?.(lowest, from + done, store.count)
          },
          prompts: made,
          templated: store.templated.slice(from, to),
          firstIndex: from,
          tokensPerPrompt: length,
          maxPromptTokens: Math.min(MAX_CANARY_PROMPT_TOKENS, length),
          levels: Array.from({ length: n + 1 - lowest }, (_, i) => lowest + i)
        })
        // a build at once in the meantime (a lower boundary) made this group stale
        if (store.traces !== old) return
        store.adopt(old ? { ...old, traces: [...old.traces, ...added.traces] } : added)
      }
    })()
    this.background(job, () => {})
  }

  /** Run a build job in the background; `done` adopts its result. */
  private background<T>(job: Generator<void, T>, done: (t: T) => void): void {
    this.building = runInBackground(job, {
      signal: this.stop.signal,
      // every free turn while no real step goes on (a client between requests), else its share
      share: () =>
        this.share ??
        (performance.now() - this.lastStepMs > IDLE_AFTER_MS ? 1 : (this.o.backgroundShare ?? DEFAULT_BACKGROUND_SHARE))
    })
      .then(done)
      .catch((err: Error) => {
        if (!this.stop.signal.aborted) this.o.onBuildError?.(err)
      })
      .finally(() => {
        this.building = undefined
        this.lengthening = false
        this.share = undefined
      })
  }

  /** What every build shares: model, kernels, the client's tokenizer and edge, seed, templates, progress. */
  private common(boundary: number) {
    return {
      model: this.model,
      kernels: this.o.kernels ?? createReferenceKernels(),
      templated: this.templated,
      seed: this.o.seed ?? 1,
      ...(this.o.tokenizer ? { tokenizer: this.o.tokenizer } : {}),
      ...(this.o.edge ? { edge: this.o.edge } : {}),
      // a build in the background reports progress only once someone waits for it (hurry): a
      // progress line drawn under a generation's streamed tokens would garble them (issue 31)
      onProgress: (done: number, total: number) => {
        if (!this.slow || this.share === 1) this.o.onBuild?.(boundary, done, total)
      }
    }
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
        ...this.common(boundary),
        prompts,
        tokensPerPrompt: this.wanted,
        maxPromptTokens: Math.min(MAX_CANARY_PROMPT_TOKENS, this.wanted),
        levels: Array.from({ length: n + 1 - from }, (_, i) => from + i)
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
    const options = { ...this.common(boundary), prompts, tokensPerPrompt: this.wanted }
    const work = (prompts.length - traces.traces.length) * this.wanted + traces.traces.length * (this.wanted - this.built)
    const t0 = performance.now()
    // Longer canaries are for the session starting now (its first step asked), as a first build
    // is: at once. Built in slices, they held every token of that session back instead (a
    // returning client's 256-token generation on a 110m swarm: 8–10 tok/s, not ~65).
    const longer = this.built < this.wanted
    const over = (this.msPerPosition ?? 0) * work > (this.o.inSlicesOverMs ?? BACKGROUND_BUILD_MS)
    // a slow model's growth, longer canaries included, goes to the background as its first build did
    if (!this.slow && (!this.o.inSlices || longer || !over)) {
      this.adopt(extendCanaryTraces(traces, options), work, t0)
      return
    }
    this.lengthening = longer
    // a build at once in the meantime (a lower boundary) made these stale
    const adoptIfCurrent = (grown: CanaryTraces): void => {
      if (this.traces === traces) this.adopt(grown)
    }
    if (this.slow) this.background(extendCanaryTracesJob(traces, options), adoptIfCurrent)
    else {
      this.building = extendCanaryTracesInSlices(traces, options, { signal: this.stop.signal })
        .then(adoptIfCurrent)
        .catch((err: Error) => {
          if (!this.stop.signal.aborted) this.o.onBuildError?.(err)
        })
        .finally(() => {
          this.building = undefined
          this.lengthening = false
        })
    }
  }

  /** Serve `traces` from now on; `work` positions built at once since `t0` set the projection. */
  private adopt(traces: CanaryTraces, work?: number, t0?: number): void {
    if (work !== undefined && t0 !== undefined && work > 0) this.msPerPosition = (performance.now() - t0) / work
    this.traces = traces
    this.sets.clear()
    // kept for the next run (plain prompts only: a templated one's template is this run's)
    if (traces !== this.o.bank && this.templated.every((t) => t === undefined)) this.o.saved?.save(traces)
  }

  /** secretPrompts as a sliced job (promptsJob, else promptsFrom at once); undefined without either. */
  private *secretPromptsJob(from: number, count: number): Generator<void, string[] | undefined> {
    const job = this.o.promptsJob
    if (!job) return undefined
    const made = yield* secretPromptsFollowingJob(this.history, this.model, job, {
      count,
      from,
      seed: this.o.seed ?? 1,
      ...(this.o.tokenizer ? { tokenizer: this.o.tokenizer } : {})
    })
    made.templated.forEach((t, k) => {
      this.templated[from + k] = t
    })
    return made.texts
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
