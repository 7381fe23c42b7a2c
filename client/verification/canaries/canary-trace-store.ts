import {
  buildCanaryTraces,
  buildCanaryTracesJob,
  CanariesPendingError,
  CanaryBankLevelError,
  type CanarySet,
  type CanaryTraces,
  canarySetFromTraces,
  DEFAULT_CANARY_LENGTH,
  DEFAULT_CANARY_PROMPTS,
  extendCanaryTraces,
  extendCanaryTracesInSlices,
  extendCanaryTracesJob,
  MAX_CANARY_PROMPT_TOKENS
} from '../../../canary/index.js'
import { createReferenceKernels, type ModelFile } from '../../../shards/index.js'
import { CanaryBuildRunner } from './canary-build-runner.js'
import { SecretCanaryPrompts } from './canary-secret-prompts.js'
import { FIRST_BUILD_AT_ONCE_MACS, firstBuildMacs } from './canary-set-store.js'
import type { PromptHistory } from './canary-template.js'
import { BACKGROUND_BUILD_MS, type CanaryTraceStoreOptions } from './canary-trace-store-options.js'

export { IDLE_AFTER_MS } from './canary-build-runner.js'
export { BACKGROUND_BUILD_MS, type CanaryTraceStoreOptions } from './canary-trace-store-options.js'

/**
 * Canaries a slow model's background build makes at a time (issue 31): the first decoys wait for
 * this many, not the whole set, and each group is kept for the next run as soon as it is built.
 */
export const FIRST_GROUP = 2

/**
 * The traces decoys are cut from (one set of traces, built on the client's own trusted kernels and
 * kept in memory only), their secret prompts, and how they grow: longer when a real session
 * outgrows them, more canaries when a peer has seen them all.
 */
export class CanaryTraceStore {
  private traces?: CanaryTraces
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
  /** The secret set's prompts, how many it holds, and the real prompts they follow. */
  private readonly secret: SecretCanaryPrompts
  /** The client's real prompts as secret canaries follow them (openings, chat templates). */
  readonly history: PromptHistory
  /** Per prompt of `prompts`: made by a chat template (then kept whole; `special`: control tokens). */
  readonly templated: ({ special: boolean } | undefined)[]
  /**
   * The build in slices or in the background under way: whether it makes longer canaries
   * (`lengthening`), its pace (`hurry`: someone waits for it), its end (`settled`), its stop (`close`).
   */
  readonly builds: CanaryBuildRunner
  /** Milliseconds per canary position of the last build (projects the next one's time). */
  private msPerPosition?: number
  /** Builds go to the background (the first was projected over firstAtOnceMacs). */
  private slow = false
  /** Canaries of the first secret set (before any growth). */
  private readonly firstCount: number

  constructor(
    private readonly model: ModelFile,
    private readonly o: CanaryTraceStoreOptions
  ) {
    this.secret = new SecretCanaryPrompts(model, o)
    this.firstCount = this.secret.count
    this.history = this.secret.history
    this.templated = this.secret.templated
    this.builds = new CanaryBuildRunner(o)
    const seqLen = model.config.seqLen
    this.length = o.bank
      ? Math.min(...o.bank.traces.map((t) => t.tokens.length))
      : Math.min(seqLen, o.length ?? Math.max(DEFAULT_CANARY_LENGTH, o.maxLength))
    // an explicit length (or a bank) is built as given; the default grows with real sessions
    this.wanted = o.bank || o.length !== undefined ? this.length : 0
    if (o.bank) this.traces = o.bank
    const kept = !o.bank && !o.prompts ? o.saved?.load() : undefined
    if (kept && kept.nLayers === model.config.nLayers && kept.dim === model.config.dim) {
      // a returning client's set: its prompts stay prompts 0..k of the secret set, and it grows from there
      this.traces = kept
      this.secret.keep(kept.traces.map((t) => t.text))
    }
  }

  /** Positions every canary has now. */
  private get built(): number {
    return this.traces ? Math.min(...this.traces.traces.map((t) => t.tokens.length)) : 0
  }

  /** Canaries made (prompts) but not yet built (a growth in slices under way). */
  get pending(): boolean {
    return this.builds.busy || this.missing()
  }

  /** No canary built yet, the first set building in the background. */
  get firstPending(): boolean {
    return this.traces === undefined && this.builds.busy
  }

  /**
   * The first secret set is not whole yet (none built, or a returning client's kept part) and is
   * built in the background (a slow model's, issue 31): real sessions are replayed meanwhile.
   */
  get firstInBackground(): boolean {
    return (this.traces?.traces.length ?? 0) < this.firstCount && this.inBackground()
  }

  private missing(): boolean {
    const t = this.traces
    return !this.o.bank && t !== undefined && ((this.secret.texts?.length ?? 0) > t.traces.length || this.built < this.wanted)
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
    this.builds.stepped()
    const want = Math.min(this.length, Math.max(2, maxLength ?? (this.wanted || this.length)))
    const built = this.built
    // grows at least twofold, so a client whose sessions keep getting longer grows few times
    if (want > this.wanted) this.wanted = built > 0 && want > built ? Math.min(this.length, Math.max(want, 2 * built)) : want
    if (this.o.bank?.traces.some((t) => t.states[boundary] === undefined)) {
      throw new CanaryBankLevelError(`the canary bank holds no states at block boundary ${boundary}: rebuild it with that level`)
    }
    const traces = this.traces
    const slow = this.inBackground()
    if (slow && !this.builds.busy && (traces?.traces.length ?? 0) < this.secret.count)
      this.buildGroups(traces ? undefined : boundary)
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
    if (this.o.bank || this.o.prompts) return false
    // a slow model's new canaries are made in the background, a group at a time (buildGroups)
    return this.secret.grow(this.slow)
  }

  /** Whether a first build (none built, none kept) goes to the background: projected long, with inSlices. */
  private inBackground(): boolean {
    // secret sets only (made by promptsJob): given prompts and banks are built at once or not at all
    if (!this.o.inSlices || this.o.bank || this.o.prompts || !this.o.promptsJob) return false
    const macs = firstBuildMacs(this.model.config, this.secret.count, Math.max(2, this.wanted), true)
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
        if (from >= store.secret.count) return
        const to = Math.min(store.secret.count, from + FIRST_GROUP)
        const made = yield* store.secret.group(from, to)
        if (!made) return
        const length = old ? store.built : Math.max(2, store.wanted)
        const lowest = old ? old.traces[0].states.findIndex((x) => x !== undefined) : (first ?? 0)
        const added = yield* buildCanaryTracesJob({
          ...store.common(lowest),
          // the whole set's progress (a progress line for whoever waits: verifiedStream), not the group's
          onProgress: (done: number) => {
            if (store.builds.hurried) store.o.onBuild?.(lowest, from + done, store.secret.count)
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
    this.builds.background(job, () => {})
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
        if (!this.slow || this.builds.hurried) this.o.onBuild?.(boundary, done, total)
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
    const prompts = this.o.prompts ?? this.secret.all() ?? DEFAULT_CANARY_PROMPTS.slice(0, 4)
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
    if (this.builds.busy) return
    const traces = this.traces!
    const prompts = this.secret.texts ?? this.o.prompts ?? traces.traces.map((t) => t.text)
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
    this.builds.lengthening = longer
    // a build at once in the meantime (a lower boundary) made these stale
    const adoptIfCurrent = (grown: CanaryTraces): void => {
      if (this.traces === traces) this.adopt(grown)
    }
    if (this.slow) this.builds.background(extendCanaryTracesJob(traces, options), adoptIfCurrent)
    else this.builds.inSlices((signal) => extendCanaryTracesInSlices(traces, options, { signal }), adoptIfCurrent)
  }

  /** Serve `traces` from now on; `work` positions built at once since `t0` set the projection. */
  private adopt(traces: CanaryTraces, work?: number, t0?: number): void {
    if (work !== undefined && t0 !== undefined && work > 0) this.msPerPosition = (performance.now() - t0) / work
    this.traces = traces
    this.sets.clear()
    // kept for the next run (plain prompts only: a templated one's template is this run's)
    if (traces !== this.o.bank && this.templated.every((t) => t === undefined)) this.o.saved?.save(traces)
  }
}
