import { InvalidSpeculationError } from '../errors.js'

export interface DraftLengthOptions {
  /** Longest draft per step. Default 8. */
  readonly maxDraft?: number
  /** Acceptance rate assumed before any draft was checked. Default 0.6. */
  readonly priorAcceptance?: number
}

/**
 * Chooses K, the tokens drafted per step, from what it measures (issue 18: K adapts to the
 * acceptance rate and the round trip). A step of K drafts yields 1 + S(1) + … + S(K) tokens on
 * average, where S(i) is the measured share of steps that drafted at least i tokens and kept the
 * first i. With independent acceptances at rate a, S(i) = a^i and this is Leviathan et al. 2023,
 * eq. 1; drafters such as prompt lookup are not independent (a draft that matched its first
 * tokens tends to run on), so S is measured per draft position rather than derived from one rate.
 * A step costs base + K · (rowMs + draftMs): the round trip and one row's compute (base), each
 * extra row's compute on every hop and the client's head, and the drafter's time per token. K
 * maximises tokens per ms. base and rowMs come from a least-squares fit of step time against rows, with old
 * steps forgotten geometrically; until the fit has two different row counts, rows cost nothing
 * beyond the base (so K grows while the round trip dominates, which is when speculation pays).
 */
export class DraftLength {
  private readonly maxDraft: number
  private readonly prior: number
  private drafted = 0
  private accepted = 0
  // decayed per draft position i (index i − 1): steps that drafted ≥ i tokens, and kept the first i
  private readonly tries: Float64Array
  private readonly kept: Float64Array
  // decayed sums for the fit ms = base + rowMs * rows
  private n = 0
  private sx = 0
  private sy = 0
  private sxx = 0
  private sxy = 0
  private draftMsPerToken = 0
  private static readonly DECAY = 0.9

  constructor(options: DraftLengthOptions = {}) {
    this.maxDraft = options.maxDraft ?? 8
    if (!Number.isInteger(this.maxDraft) || this.maxDraft < 0)
      throw new InvalidSpeculationError(`maxDraft must be an integer ≥ 0, got ${this.maxDraft}`)
    const prior = options.priorAcceptance ?? 0.6
    if (!(prior >= 0 && prior < 1)) throw new InvalidSpeculationError(`priorAcceptance must be in [0, 1), got ${prior}`)
    this.prior = prior
    // the prior counts as four drafted tokens
    this.drafted = 4
    this.accepted = 4 * prior
    this.tries = new Float64Array(this.maxDraft)
    this.kept = new Float64Array(this.maxDraft)
  }

  /** S(i): the share of steps that drafted ≥ i tokens and kept the first i (prior a^i as one step). */
  survival(i: number): number {
    if (!Number.isInteger(i) || i < 1 || i > this.maxDraft)
      throw new InvalidSpeculationError(`draft position must be an integer in [1, ${this.maxDraft}], got ${i}`)
    return (this.kept[i - 1] + this.prior ** i) / (this.tries[i - 1] + 1)
  }

  /** Acceptance rate per drafted token (decayed, with the prior). */
  get acceptance(): number {
    return this.accepted / this.drafted
  }

  /** A step checked `drafted` tokens and kept `accepted` of them. */
  observeDraft(drafted: number, accepted: number): void {
    if (drafted === 0) return
    const d = DraftLength.DECAY ** drafted
    this.drafted = this.drafted * d + drafted
    this.accepted = this.accepted * d + accepted
    for (let i = 0; i < this.maxDraft; i++) {
      this.tries[i] *= DraftLength.DECAY
      this.kept[i] *= DraftLength.DECAY
    }
    for (let i = 0; i < Math.min(drafted, this.maxDraft); i++) {
      this.tries[i] += 1
      if (accepted > i) this.kept[i] += 1
    }
  }

  /** A step of `rows` rows took `ms` end to end; drafting took `draftMs` for `draftTokens` tokens. */
  observeStep(rows: number, ms: number, draftMs = 0, draftTokens = 0): void {
    const d = DraftLength.DECAY
    this.n = this.n * d + 1
    this.sx = this.sx * d + rows
    this.sy = this.sy * d + ms
    this.sxx = this.sxx * d + rows * rows
    this.sxy = this.sxy * d + rows * ms
    if (draftTokens > 0) {
      const per = draftMs / draftTokens
      this.draftMsPerToken = this.draftMsPerToken === 0 ? per : 0.8 * this.draftMsPerToken + 0.2 * per
    }
  }

  /** The fitted cost model: ms of a step's fixed part and of each row. */
  costModel(): { baseMs: number; rowMs: number } {
    const mean = this.n > 0 ? this.sy / this.n : 0
    const varX = this.n > 0 ? this.sxx / this.n - (this.sx / this.n) ** 2 : 0
    if (varX < 0.25) return { baseMs: mean, rowMs: 0 }
    const rowMs = Math.max(0, (this.sxy / this.n - (this.sx / this.n) * (this.sy / this.n)) / varX)
    return { baseMs: Math.max(0, this.sy / this.n - rowMs * (this.sx / this.n)), rowMs }
  }

  /** The draft length for the next step, at most `limit` (tokens left, room in the session). */
  next(limit: number): number {
    const cap = Math.max(0, Math.min(this.maxDraft, limit))
    if (cap === 0) return 0
    const { baseMs, rowMs } = this.costModel()
    const base = Math.max(baseMs, 1e-3)
    let best = 0
    let bestRate = 1 / (base + rowMs)
    let tokens = 1
    let s = 1
    for (let k = 1; k <= cap; k++) {
      s = Math.min(s, this.survival(k)) // keeping the first k needs keeping the first k − 1
      tokens += s
      const rate = tokens / (base + rowMs * (k + 1) + this.draftMsPerToken * k)
      if (rate > bestRate * 1.0001) {
        best = k
        bestRate = rate
      }
    }
    // never stop drafting for good: one token keeps the acceptance estimate alive
    return Math.max(best, 1)
  }
}
