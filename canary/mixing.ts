import type { CanarySet } from './canary-set.js'
import { CanariesSpentError, CanaryArgumentError } from './errors.js'
import { DEFAULT_CANARY_RATE } from './options.js'
import { createRandom } from './rng.js'
import { WIRE_DTYPES, type WireDType } from './wire-roundtrip.js'

/*
 * Mixing canaries into ordinary traffic (client side, no networking). A canary session is a
 * decoy: it opens like a real session (same max_length, wire dtype), prefills a prompt-length
 * block of rows then sends 1-row steps, and it advances in lockstep with a real session (one
 * canary step per real step while it lasts), so its timing pattern is that of a real session.
 */

export interface CanaryTick {
  /** Send the next step of the decoy session alongside this real step. */
  readonly send: boolean
  /** This step opens a new decoy session (the first of its steps). */
  readonly start: boolean
  /** Index of the step within the decoy session (0 = prefill); -1 when nothing is sent. */
  readonly index: number
}

export interface CanaryScheduler {
  readonly rate: number
  /** Call once per real step. */
  onRealStep(): CanaryTick
  /** Steps seen so far: real, canary, and the canary fraction canary / (real + canary). */
  stats(): { real: number; canary: number; fraction: number }
}

export interface CanarySchedulerOptions {
  /** Fraction of all steps that are canaries, in (0, 0.5]; default 0.03. */
  readonly rate?: number
  readonly seed?: number
  /** Mean steps of a decoy session (prefill + decode steps); default 16. */
  readonly meanSessionSteps?: number
  /** Steps of the next decoy session when it starts (e.g. from the planner); default the mean. */
  readonly sessionSteps?: () => number
}

/**
 * Per real step: while a decoy session is active it sends its next step; when idle it starts a
 * new one with probability p, chosen so that canary steps are `rate` of all steps. A renewal
 * cycle has an idle run of mean (1 − p)/p real steps, then N real steps with N canary steps,
 * so rate = N / (2N + (1 − p)/p), i.e. p = 1 / (1 + N(1 − 2·rate)/rate).
 */
export function createCanaryScheduler(options: CanarySchedulerOptions = {}): CanaryScheduler {
  const rate = options.rate ?? DEFAULT_CANARY_RATE
  if (typeof rate !== 'number' || !(rate > 0 && rate <= 0.5))
    throw new CanaryArgumentError(`rate must be in (0, 0.5], got ${rate}`)
  const mean = options.meanSessionSteps ?? 16
  if (!(Number.isFinite(mean) && mean >= 1)) throw new CanaryArgumentError('meanSessionSteps must be ≥ 1')
  const seed = options.seed ?? 1
  if (!Number.isSafeInteger(seed)) throw new CanaryArgumentError('seed must be a safe integer')
  const rnd = createRandom(seed)
  const p = 1 / (1 + (mean * (1 - 2 * rate)) / rate)
  let remaining = 0
  let index = -1
  let real = 0
  let canary = 0
  return {
    rate,
    onRealStep() {
      real++
      if (remaining > 0) {
        remaining--
        canary++
        return { send: true, start: false, index: ++index }
      }
      if (rnd.next() < p) {
        const n = options.sessionSteps ? options.sessionSteps() : Math.round(mean)
        if (!Number.isInteger(n) || n < 1) throw new CanaryArgumentError(`sessionSteps() must return an integer ≥ 1, got ${n}`)
        remaining = n - 1
        index = 0
        canary++
        return { send: true, start: true, index: 0 }
      }
      return { send: false, start: false, index: -1 }
    },
    stats: () => ({ real, canary, fraction: canary / Math.max(1, real + canary) })
  }
}

/** What a peer sees of a session's shape. */
export interface SessionShape {
  /** Rows of the first (prefill) step. */
  readonly promptLength: number
  /** Steps in all: the prefill, then 1-row steps. */
  readonly steps: number
  readonly maxLength: number
  readonly wire: WireDType
}

export interface DecoyStep {
  readonly startPosition: number
  readonly rows: number
}

export interface DecoyPlan {
  /** The canary whose rows [0, positions) the session sends. */
  readonly canaryIndex: number
  readonly maxLength: number
  readonly wire: WireDType
  readonly steps: readonly DecoyStep[]
}

export interface DecoyPlanner {
  /** Record a real session's shape; decoys copy shapes drawn from the recent ones. */
  observeReal(shape: SessionShape): void
  /** Real shapes recorded (up to `history`). */
  readonly observed: number
  /**
   * A decoy over `set` (the planner's own set by default). With `prefillEnds` (per canary, the
   * positions its prefill may end at, e.g. sentence ends) the prefill ends at the one nearest the
   * real shape's, so a decoy's prefill never stops where no real prompt would. `avoid`: canaries
   * not to use (sent to the decoy's peers before); CanariesSpentError when it leaves none.
   */
  plan(set?: CanarySet, prefillEnds?: readonly (readonly number[])[], avoid?: (index: number) => boolean): DecoyPlan
}

export interface DecoyPlannerOptions {
  /** The canaries plan() picks from when it is not given a set. */
  readonly set?: CanarySet
  readonly seed?: number
  /** max_length and wire dtype used before any real session has been observed. */
  readonly maxLength?: number
  readonly wire?: WireDType
  /** Real shapes remembered (default 256). */
  readonly history?: number
}

/**
 * Plans decoy sessions over a canary set whose shapes follow the client's real sessions: a
 * recent real shape is drawn at random (prefill rows, steps, so session length, and max length),
 * and a canary long enough for its prefill plus decode steps is picked (the longest one,
 * shortened, if none is). Before any real shape is known, a decoy runs its canary to the end.
 */
export function createDecoyPlanner(options: DecoyPlannerOptions = {}): DecoyPlanner {
  const checkSet = (set: CanarySet | undefined): CanarySet => {
    if (!set || !Array.isArray(set.canaries) || set.canaries.length === 0)
      throw new CanaryArgumentError('the planner needs a non-empty canary set')
    return set
  }
  if (options.set !== undefined) checkSet(options.set)
  const rnd = createRandom(options.seed ?? 1)
  const keep = options.history ?? 256
  const shapes: SessionShape[] = []
  const defaultMax = options.maxLength ?? 256
  const defaultWire = options.wire ?? 'f32'
  if (!WIRE_DTYPES.includes(defaultWire)) throw new CanaryArgumentError(`unknown wire dtype ${defaultWire}`)
  return {
    observeReal(shape) {
      const ok =
        shape &&
        Number.isInteger(shape.promptLength) &&
        shape.promptLength >= 1 &&
        Number.isInteger(shape.steps) &&
        shape.steps >= 1 &&
        Number.isInteger(shape.maxLength) &&
        shape.maxLength >= shape.promptLength + shape.steps - 1 &&
        WIRE_DTYPES.includes(shape.wire)
      if (!ok)
        throw new CanaryArgumentError(
          'a session shape needs integer promptLength, steps, maxLength ≥ positions, and a wire dtype'
        )
      shapes.push(shape)
      if (shapes.length > keep) shapes.shift()
    },
    get observed() {
      return shapes.length
    },
    plan(given, prefillEnds, avoid) {
      const set = checkSet(given ?? options.set)
      const free = set.canaries.map((_, i) => i).filter((i) => !avoid?.(i))
      if (free.length === 0) throw new CanariesSpentError(`all ${set.canaries.length} canaries were sent to this peer already`)
      let shape: SessionShape
      if (shapes.length > 0) shape = shapes[rnd.int(shapes.length)]
      else {
        const c = set.canaries[free[rnd.int(free.length)]]
        shape = {
          promptLength: c.promptLength,
          steps: c.tokens.length - c.promptLength + 1,
          maxLength: defaultMax,
          wire: defaultWire
        }
      }
      const all = set.canaries.map((_, i) => i)
      const ends = prefillEnds ? exactEnds(set, prefillEnds, shape, free) : []
      // A canary the peer has not seen that does not fit the real shape (no sentence end at its
      // prefill length, or too short) would show as a decoy by its shape: when one it has seen
      // would fit, the set counts as spent (it grows, or a bank repeats) rather than cut short.
      if (prefillEnds && ends.length === 0 && exactEnds(set, prefillEnds, shape, all).length > 0)
        throw new CanariesSpentError('no canary this peer has not seen fits the real shape')
      const cut = ends.length > 0 ? ends[rnd.int(ends.length)] : undefined
      let canaryIndex: number
      let prompt = shape.promptLength
      let decode = shape.steps - 1
      if (cut) {
        canaryIndex = cut.index
        prompt = cut.end
        // a prefill longer than the real one must still leave its steps inside the session's
        // max length: a step past it fails on the last hop after the middle hops saw it, and a
        // step never audited is one no real session shows (test/e2e/canary-chain.test.ts)
        decode = Math.max(0, Math.min(decode, set.canaries[canaryIndex].tokens.length - prompt, shape.maxLength - prompt))
      } else {
        const need = shape.promptLength + shape.steps - 1
        const fits = free.map((i) => ({ i, n: set.canaries[i].tokens.length })).filter((c) => c.n >= need)
        if (fits.length === 0 && free.length < all.length && all.some((i) => set.canaries[i].tokens.length >= need))
          throw new CanariesSpentError('no canary this peer has not seen is long enough for the real shape')
        if (fits.length > 0) canaryIndex = fits[rnd.int(fits.length)].i
        else {
          canaryIndex = free.reduce((b, i) => (set.canaries[i].tokens.length > set.canaries[b].tokens.length ? i : b), free[0])
          const n = set.canaries[canaryIndex].tokens.length
          prompt = Math.min(prompt, n)
          decode = Math.min(decode, n - prompt)
        }
      }
      const steps: DecoyStep[] = [{ startPosition: 0, rows: prompt }]
      for (let k = 0; k < decode; k++) steps.push({ startPosition: prompt + k, rows: 1 })
      return { canaryIndex, maxLength: shape.maxLength, wire: shape.wire, steps }
    }
  }
}

/**
 * The (canary, prefill end) pairs among `indices` at exactly the real shape's prompt length that
 * leave room for its decode steps; none when no canary has a sentence end there (the prefill
 * then copies the real length wherever it falls).
 */
function exactEnds(
  set: CanarySet,
  prefillEnds: readonly (readonly number[])[],
  shape: SessionShape,
  indices: readonly number[]
): { index: number; end: number }[] {
  if (prefillEnds.length !== set.canaries.length)
    throw new CanaryArgumentError(`prefillEnds holds ${prefillEnds.length} lists for ${set.canaries.length} canaries`)
  const all = indices.flatMap((index) =>
    prefillEnds[index]
      .filter((e) => Number.isInteger(e) && e >= 1 && e < set.canaries[index].tokens.length && e < shape.maxLength)
      .map((end) => ({ index, end }))
  )
  // Only an end at exactly the real prompt's length: a decoy's shape (prefill rows, steps) must be
  // one a real session had, which a middle hop sees directly (test/e2e/canary-chain.test.ts); a
  // nearby end would tell decoys by their prefill length wherever real prompts share one.
  const room = (c: { index: number; end: number }): number => set.canaries[c.index].tokens.length - c.end
  return all.filter((c) => c.end === shape.promptLength && room(c) >= shape.steps - 1)
}
