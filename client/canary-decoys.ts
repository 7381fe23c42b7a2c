import {
  buildCanaryTraces,
  CanariesSpentError,
  CanaryBankLevelError,
  type CanarySet,
  type CanaryTraces,
  canarySetFromTraces,
  createDecoyPlanner,
  DEFAULT_CANARY_LENGTH,
  DEFAULT_CANARY_PROMPTS,
  type DecoyPlan,
  type DecoyPlanner,
  type DecoyStep,
  extendCanaryTraces,
  MAX_CANARY_PROMPT_TOKENS,
  type WireDType
} from '../canary/index.js'
import { createReferenceKernels, createTokenizer, type Kernels, type ModelFile } from '../shards/index.js'
import { type SpeculativeDecoy, speculativeDone } from './canary-decoy-speculative.js'
import { PromptHistory, type PromptsFromContext, type PromptTemplate, secretPromptsFollowing } from './canary-template.js'
import type { StepContext } from './canary-types.js'
import type { ChainedDecoy } from './chained-decoy.js'
import type { HopSession, HopTarget } from './hop.js'

/** A token that ends a sentence: . ! or ? (then maybe a closing quote), as decoded. */
const SENTENCE_END = /[.!?]["']?\s*$/

/** A decoy session: one hop's (relayed) or the whole route's (chained), running through one canary. */
export interface Decoy {
  /** Relay: one hop; chain: every hop of the route, in order. */
  readonly targets: readonly HopTarget[]
  readonly hop?: HopSession
  readonly chain?: ChainedDecoy
  readonly sessionId: string
  readonly canary: number
  /** The plan: a real session's shape (prefill, then one row a step) over the canary. */
  readonly steps: readonly DecoyStep[]
  next: number
  stepId: number
  /** Chained: hops from this index on saw an input a suspicious upstream hop had altered. */
  taintedFrom: number
  /** Speculative shape (the real session speculated when it opened): steps after the prefill. */
  readonly spec?: SpeculativeDecoy
}

/** Whether a decoy has sent its whole plan (the next probe opens a new one). */
export function decoyDone(d: Decoy): boolean {
  return d.spec && d.next > 0 ? speculativeDone(d.spec) : d.next >= d.steps.length
}

/**
 * What decoys are made of: canary sets at any boundary (views of one set of traces, built once on
 * the client's own trusted kernels and kept in memory only), and the shapes of the client's real
 * sessions, which decoys copy.
 */
export class CanaryMaterial {
  private traces?: CanaryTraces
  private prompts?: readonly string[]
  private readonly sets = new Map<number, CanarySet>()
  /** Per canary of the traces, the positions a decoy's prefill may end at (sentence ends). */
  private prefillEnds?: readonly (readonly number[])[]
  private readonly planner: DecoyPlanner
  /** Plans from the session in progress, before any real session has ended. */
  private readonly standIn: DecoyPlanner
  /** Real sessions in progress: their shape so far. */
  private readonly active = new Map<string, { promptLength: number; steps: number; maxLength: number; wire: WireDType }>()
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
  /** Per peer, the canaries sent to it (by index): none is sent to a peer twice. */
  private readonly sent = new Map<string, Set<number>>()
  /** Peers that have been sent every canary of a set that cannot grow. */
  private readonly spentFor = new Set<string>()
  /** The client's real prompts as secret canaries follow them (openings, chat templates). */
  private readonly history = new PromptHistory()
  /** Per prompt of `prompts`: made by a chat template (then kept whole; `special`: control tokens). */
  private readonly templated: ({ special: boolean } | undefined)[] = []

  constructor(
    private readonly model: ModelFile,
    private readonly o: {
      readonly kernels?: Kernels
      readonly prompts?: readonly string[]
      /**
       * Made on first use when `prompts` is not given (secret canaries: client/canary-secret.ts):
       * prompts `from` to `count` of the secret set (prompt i is fixed by the secret and i, and
       * by the openings observed when it is made), so the set grows by new ones.
       */
      readonly promptsFrom?: (count: number, more: PromptsFromContext) => readonly string[]
      /** Canaries the secret set starts with (default 8); doubled when a peer has seen them all. */
      readonly count?: number
      /** A peer has been sent every canary of a set that cannot grow (a bank, given prompts): repeats follow. */
      readonly onSpent?: (peerId: string, canaries: number) => void
      readonly seed?: number
      /**
       * A canary bank (canary/canary-bank.ts): traces built elsewhere, so the client never runs
       * the blocks it does not hold (a thin client). Its canaries' length sets `length`.
       */
      readonly bank?: CanaryTraces
      /** Positions per canary (default max(256, maxLength), capped by the context). */
      readonly length?: number
      readonly maxLength: number
      readonly onBuild?: (boundary: number, built: number, total: number) => void
    }
  ) {
    const seqLen = model.config.seqLen
    this.length = o.bank
      ? Math.min(...o.bank.traces.map((t) => t.tokens.length))
      : Math.min(seqLen, o.length ?? Math.max(DEFAULT_CANARY_LENGTH, o.maxLength))
    // an explicit length (or a bank) is built as given; the default grows with real sessions
    this.wanted = o.bank || o.length !== undefined ? this.length : 0
    if (o.bank) this.traces = o.bank
    this.count = o.count ?? 8
    this.planner = createDecoyPlanner({ seed: o.seed ?? 1 })
    this.standIn = createDecoyPlanner({ seed: (o.seed ?? 1) + 1, history: 1 })
  }

  /**
   * Canary inputs at a boundary, with references for every span end after it. The traces keep the
   * states from the first boundary asked for on (a route's hops all start at or after it); one
   * before it rebuilds them. `maxLength`: a real session's (prompt plus completion), so that the
   * canaries are at least that long (capped by `length`); the traces are rebuilt longer when a
   * real session outgrows them. Rebuilding regenerates the same tokens and the same states at
   * the positions built before (same seed, sampler and kernels; a row depends only on the rows
   * before it), so a decoy in progress continues on the same canary.
   */
  setFor(boundary: number, maxLength?: number): CanarySet {
    const want = Math.min(this.length, Math.max(2, maxLength ?? (this.wanted || this.length)))
    const built = this.traces ? Math.min(...this.traces.traces.map((t) => t.tokens.length)) : 0
    // grows at least twofold, so a client whose sessions keep getting longer rebuilds few times
    if (want > this.wanted) this.wanted = built > 0 && want > built ? Math.min(this.length, Math.max(want, 2 * built)) : want
    let set = this.sets.get(boundary)
    // the secret set grew (a peer had seen it whole): rebuilt with the new canaries after the old
    const grown =
      !this.o.bank && this.prompts !== undefined && this.traces !== undefined && this.traces.traces.length < this.prompts.length
    if (set && built >= this.wanted && !grown) return set
    const n = this.model.config.nLayers
    if (this.o.bank?.traces.some((t) => t.states[boundary] === undefined)) {
      throw new CanaryBankLevelError(`the canary bank holds no states at block boundary ${boundary}: rebuild it with that level`)
    }
    const traces = this.traces
    if (grown && traces && built >= this.wanted && traces.traces[0].states[boundary] !== undefined) {
      // only the new canaries: a growth used to rebuild the whole set, twice the work each time,
      // synchronously, while the real generation waited (a new relayed client spent most of its
      // first generation there: bench swarm-canary). Canary i is the same built alone (its seed).
      this.traces = extendCanaryTraces(traces, {
        model: this.model,
        kernels: this.o.kernels ?? createReferenceKernels(),
        prompts: this.prompts!,
        templated: this.templated,
        seed: this.o.seed ?? 1,
        onProgress: (done, total) => this.o.onBuild?.(boundary, done, total)
      })
      this.sets.clear()
      this.prefillEnds = undefined
    } else if (!traces || traces.traces[0].states[boundary] === undefined || (!this.o.bank && built < this.wanted) || grown) {
      // Building runs the whole model over every canary (in lockstep, canary/trace.ts), token by
      // token (sampled continuation), so the default set is small; a longer-lived client can pass
      // more prompts. Levels from the lowest boundary asked for so far.
      const from = Math.min(boundary, traces ? traces.traces[0].states.findIndex((s) => s !== undefined) : n)
      this.traces = buildCanaryTraces({
        model: this.model,
        kernels: this.o.kernels ?? createReferenceKernels(),
        prompts: this.o.prompts ?? (this.prompts ??= this.secretPrompts(0)) ?? DEFAULT_CANARY_PROMPTS.slice(0, 4),
        templated: this.templated,
        tokensPerPrompt: this.wanted,
        maxPromptTokens: Math.min(MAX_CANARY_PROMPT_TOKENS, this.wanted),
        seed: this.o.seed ?? 1,
        levels: Array.from({ length: n + 1 - from }, (_, i) => from + i),
        onProgress: (done, total) => this.o.onBuild?.(boundary, done, total)
      })
      this.sets.clear()
      this.prefillEnds = undefined
    }
    set = canarySetFromTraces(
      this.traces!, // built above when there were none
      boundary,
      Array.from({ length: n - boundary }, (_, i) => boundary + i + 1)
    )
    this.sets.set(boundary, set)
    return set
  }

  /**
   * A real step went through: a step at position 0 starts a session's shape (its rows are the
   * prefill), later ones add a step. Shapes of ended sessions go to the planner.
   */
  observeStep(ctx: StepContext, wire: WireDType): void {
    if (ctx.sessionId === undefined || ctx.startPosition === undefined || ctx.rows === undefined) return
    const cur = this.active.get(ctx.sessionId)
    if (ctx.startPosition === 0 || !cur) {
      if (cur) this.endSession(ctx.sessionId) // a failover re-prefills: the peer sees a new session
      this.active.set(ctx.sessionId, { promptLength: Math.max(1, ctx.rows), steps: 1, maxLength: ctx.maxLength, wire })
      // sessions never ended (a caller that dropped its pipeline) do not pile up
      if (this.active.size > 64) this.endSession(this.active.keys().next().value as string)
    } else cur.steps = Math.max(cur.steps + 1, ctx.startPosition - cur.promptLength + 2) // a speculative step may cover several positions
  }

  /**
   * A real prompt's tokens (BOS first where the file adds one): secret canary prompts open as the
   * client's plain prompts do, and go through its chat template as often as its sessions do
   * (client/canary-template.ts; docs/verification.md on why and what it shares).
   */
  observePrompt(tokens: readonly number[], bosId: number, o: { special?: boolean; template?: PromptTemplate } = {}): void {
    this.history.observe(tokens, bosId, o)
  }

  /** Secret prompts `from` to `count` (client/canary-template.ts), fixed from then on. */
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

  endSession(sessionId: string): void {
    const shape = this.active.get(sessionId)
    this.active.delete(sessionId)
    if (!shape || shape.maxLength < shape.promptLength + shape.steps - 1) return
    this.planner.observeReal(shape)
  }

  /**
   * A decoy plan over the set at `boundary`: a real session's shape (prefill rows, steps, max
   * length) drawn from the recent ones. Before any real session has ended, the one in progress
   * stands in, as if it ran to its max length.
   */
  plan(boundary: number, ctx: StepContext, peers: readonly string[] = []): DecoyPlan {
    // A canary input a peer has seen before tells it a decoy (a real prompt is not sent twice
    // by chance): each canary goes to a peer at most once. A secret set that a peer has seen
    // whole grows (twice as many canaries, the first ones unchanged). A bank or given prompts
    // cannot: the peer then gets a canary again (least often sent to it; logged, once per peer,
    // as `canaries-spent`): a peer no longer checked at all could tamper unchecked.
    const avoid = (i: number): boolean => peers.some((p) => this.sent.get(p)?.has(i))
    let plan: DecoyPlan
    try {
      plan = this.planOnce(boundary, ctx, avoid)
    } catch (err) {
      if (!(err instanceof CanariesSpentError)) throw err
      if (this.grow()) plan = this.planOnce(boundary, ctx, avoid)
      else {
        for (const p of peers) {
          if (this.o.onSpent && !this.spentFor.has(p)) this.o.onSpent(p, this.setFor(boundary).canaries.length)
          this.spentFor.add(p)
          this.sent.delete(p)
        }
        plan = this.planOnce(boundary, ctx, () => false)
      }
    }
    for (const p of peers) {
      let seen = this.sent.get(p)
      if (!seen) this.sent.set(p, (seen = new Set()))
      seen.add(plan.canaryIndex)
    }
    return plan
  }

  /** Twice as many secret canaries (rebuilt on the next setFor); false when the set cannot grow. */
  private grow(): boolean {
    if (this.o.bank || this.o.prompts || !this.o.promptsFrom || !this.prompts) return false
    const from = this.count
    this.count *= 2
    this.prompts = [...this.prompts, ...(this.secretPrompts(from) ?? [])]
    this.prefillEnds = undefined
    return true
  }

  private planOnce(boundary: number, ctx: StepContext, avoid: (i: number) => boolean): DecoyPlan {
    const set = this.setFor(boundary)
    if (this.planner.observed === 0) {
      const cur = ctx.sessionId === undefined ? undefined : this.active.get(ctx.sessionId)
      const prompt = Math.min(cur?.promptLength ?? set.canaries[0].promptLength, ctx.maxLength)
      this.standIn.observeReal({
        promptLength: prompt,
        steps: Math.max(1, ctx.maxLength - prompt),
        maxLength: ctx.maxLength,
        wire: 'f32'
      })
      return this.standIn.plan(set, this.endsOf(set), avoid)
    }
    return this.planner.plan(set, this.endsOf(set), avoid)
  }

  /**
   * Where a decoy's prefill may end: after a sentence end (real prompts are whole sentences, and
   * a prefill cut anywhere else shows in the row norms of its last rows: held-out AUROC 0.80-0.87
   * on hidden states before this, test/canary/indistinguishable-content.test.ts). Any sentence end
   * of the canary, its prompt's or its continuation's: keeping to the prompt's end (a corpus
   * excerpt's) was told apart more easily (held-out AUROC 0.65 at block 3). When no canary has
   * one, the prefill copies the real shape's length.
   */
  private endsOf(set: CanarySet): readonly (readonly number[])[] | undefined {
    if (this.prefillEnds) return this.prefillEnds
    if (!this.model.vocabulary) return undefined
    const tokenizer = createTokenizer(this.model.vocabulary)
    const ends = new Map<number, boolean>()
    const isEnd = (t: number): boolean => {
      let e = ends.get(t)
      if (e === undefined) ends.set(t, (e = SENTENCE_END.test(tokenizer.decode([t]))))
      return e
    }
    this.prefillEnds = set.canaries.map((c, i) => {
      // a templated session's prefill is the whole rendered prompt, to the assistant header
      if (this.templated[i]) return [c.promptLength]
      const out: number[] = []
      for (let q = 2; q < c.tokens.length; q++) if (isEnd(c.tokens[q - 1])) out.push(q)
      return out
    })
    return this.prefillEnds
  }
}
