import type { AbortOptions } from '@libp2p/interface'
import {
  CanariesPendingError,
  CanariesSpentError,
  type CanarySet,
  createDecoyPlanner,
  type DecoyPlan,
  type DecoyPlanner,
  type DecoyStep,
  type WireDType
} from '../../canary/index.js'
import { createTokenizer, type ModelFile } from '../../shards/index.js'
import type { HopSession, HopTarget } from '../session/hop.js'
import type { PromptTemplate } from './canaries/canary-template.js'
import { CanaryTraceStore, type CanaryTraceStoreOptions } from './canaries/canary-trace-store.js'
import { type SpeculativeDecoy, speculativeDone } from './canary-decoy-speculative.js'
import type { StepContext } from './canary-types.js'
import type { ChainedDecoy } from './chained-decoy.js'
import type { ReplaySession } from './span-replay.js'

/** A token that ends a sentence: . ! or ? (then maybe a closing quote), as decoded. */
const SENTENCE_END = /[.!?]["']?\s*$/

/** A decoy session: one hop's (relayed) or the whole route's (chained), running through one canary. */
export interface Decoy {
  /** Relay: one hop; chain: every hop of the route, in order. */
  readonly targets: readonly HopTarget[]
  readonly hop?: HopSession
  readonly chain?: ChainedDecoy
  /** Relayed over the whole route: a session on every hop, each its own id (client/verification/relay-decoy.ts). */
  readonly hops?: readonly HopSession[]
  /** Relayed over the route: per hop after the first, its span replayed on what it was fed (client/verification/span-replay.ts). */
  readonly replays?: readonly (ReplaySession | undefined)[]
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
 * What decoys are made of: canary sets at any boundary (views of one set of traces: the trace
 * store), and the shapes of the client's real sessions, which decoys copy.
 */
export class CanaryMaterial {
  private readonly store: CanaryTraceStore
  /** Per canary of the traces, the positions a decoy's prefill may end at (sentence ends). */
  private prefillEnds?: { readonly of: readonly (readonly number[])[]; readonly ends: readonly (readonly number[])[] }
  private readonly planner: DecoyPlanner
  /** Plans from the session in progress, before any real session has ended. */
  private readonly standIn: DecoyPlanner
  /** Real sessions in progress: their shape so far. */
  private readonly active = new Map<string, { promptLength: number; steps: number; maxLength: number; wire: WireDType }>()
  /** Per peer, the canaries sent to it (by index): none is sent to a peer twice. */
  private readonly sent = new Map<string, Set<number>>()
  /** Peers that have been sent every canary of a set that cannot grow. */
  private readonly spentFor = new Set<string>()

  constructor(
    private readonly model: ModelFile,
    private readonly o: CanaryTraceStoreOptions & {
      /** A peer has been sent every canary of a set that cannot grow (a bank, given prompts): repeats follow. */
      readonly onSpent?: (peerId: string, canaries: number) => void
    }
  ) {
    this.store = new CanaryTraceStore(model, o)
    this.planner = createDecoyPlanner({ seed: o.seed ?? 1 })
    this.standIn = createDecoyPlanner({ seed: (o.seed ?? 1) + 1, history: 1 })
  }

  /** Positions per canary at most: as long as the longest real session expected. */
  get length(): number {
    return this.store.length
  }

  /** The canary set at a boundary, at least `maxLength` positions long once built (CanaryTraceStore.setFor). */
  setFor(boundary: number, maxLength?: number): CanarySet {
    return this.store.setFor(boundary, maxLength)
  }

  /**
   * A real session's first step: its set at `boundary`, built now or (a slow model's, issue 31)
   * started in the background; no wait either way.
   */
  prepare(boundary: number, maxLength: number): void {
    try {
      this.store.setFor(boundary, maxLength)
    } catch (err) {
      if (!(err instanceof CanariesPendingError)) throw err
    }
  }

  /** No canary yet: the first set is building in the background (a slow model's, issue 31). */
  get firstPending(): boolean {
    return this.store.firstPending
  }

  /** The first set is not whole yet and is built in the background: real sessions are replayed meanwhile. */
  get firstInBackground(): boolean {
    return this.store.firstInBackground
  }

  /** A build in slices under way, done (tests; `hurry`: at every free turn, for a caller that waits). */
  async settled(options: AbortOptions & { hurry?: boolean } = {}): Promise<void> {
    if (options.hurry) this.store.builds.hurry()
    await this.store.builds.settled(options)
  }

  /** Stop building (the client is closing). */
  close(): void {
    this.store.builds.close()
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
   * (client/verification/canaries/canary-template.ts; docs/verification.md on why and what it shares).
   */
  observePrompt(tokens: readonly number[], bosId: number, o: { special?: boolean; template?: PromptTemplate } = {}): void {
    this.store.history.observe(tokens, bosId, o)
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
    // canaries shorter than the real session would give decoys a shape no real session had
    if (this.store.builds.lengthening) throw new CanariesPendingError('longer canaries are being built')
    let plan: DecoyPlan
    try {
      plan = this.planOnce(boundary, ctx, avoid)
    } catch (err) {
      if (!(err instanceof CanariesSpentError)) throw err
      const grew = !this.store.pending && this.store.grow()
      if (grew) this.setFor(boundary) // at once, or in slices (then pending)
      // the new canaries are being built in slices: none for this peer until they are
      if (this.store.pending)
        throw new CanariesPendingError('new canaries are being built for a peer that has seen all the others')
      if (grew) plan = this.planOnce(boundary, ctx, avoid)
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
    // a peer half way through the set starts its next canaries building (in slices, between real
    // steps), so that its start-up burst seldom waits for them
    const half = this.setFor(boundary).canaries.length / 2
    if (this.o.inSlices && !this.store.pending && peers.some((p) => (this.sent.get(p)?.size ?? 0) >= half) && this.store.grow())
      this.setFor(boundary)
    return plan
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
    // the same tokens at every boundary: kept until the traces change
    const cached = this.prefillEnds
    if (cached && cached.of.length === set.canaries.length && cached.of.every((t, i) => t === set.canaries[i].tokens))
      return cached.ends
    if (!this.model.vocabulary) return undefined
    const tokenizer = this.o.tokenizer ?? createTokenizer(this.model.vocabulary)
    const ends = new Map<number, boolean>()
    const isEnd = (t: number): boolean => {
      let e = ends.get(t)
      if (e === undefined) ends.set(t, (e = SENTENCE_END.test(tokenizer.decode([t]))))
      return e
    }
    const cut = set.canaries.map((c, i) => {
      // a templated session's prefill is the whole rendered prompt, to the assistant header
      if (this.store.templated[i]) return [c.promptLength]
      const out: number[] = []
      for (let q = 2; q < c.tokens.length; q++) if (isEnd(c.tokens[q - 1])) out.push(q)
      return out
    })
    this.prefillEnds = { of: set.canaries.map((c) => c.tokens), ends: cut }
    return cut
  }
}
