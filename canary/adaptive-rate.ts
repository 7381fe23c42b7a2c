import { CanaryArgumentError } from './errors.js'
import { DEFAULT_CANARY_RATE, DEFAULT_DECOYS_IN_FLIGHT } from './options.js'

/*
 * Per-peer canary rate, trust on evidence. A form of Dodge's continuous sampling plan (CSP-1,
 * Dodge 1943; MIL-STD-1235): inspect every unit until a run of clean units has been seen, then
 * only a fraction, and go back to inspecting every unit as soon as one looks bad.
 *  - A peer never checked gets a canary after every real step (`start`, default 1) until it has
 *    answered `startCanaries` of them; from then on the base rate (default 0.03).
 *  - A peer whose posterior P(tampering) reaches `suspectPosterior` (default 0.1: one canary with a
 *    drift far outside the benign spread) is probed at `suspectRate` (default 1, every step) until
 *    the evidence either convicts it or falls back below the threshold.
 * Why this keeps the detector's guarantees: which steps get a canary depends only on canaries
 * already scored (a predictable sampling rule), so the likelihood ratio of the canaries observed
 * is still a nonnegative supermartingale under "benign" and Ville's inequality bounds a benign
 * peer's chance of ever reaching the exclusion bound exactly as at a fixed rate (optional
 * sampling; cf. Wald 1947 §3 on sequential tests with data-dependent sampling).
 * Why a burst, and how long: a peer tampering on a fraction q of steps is convicted by two
 * tampered canaries (one moves the log-likelihood ratio by at most 8, the bound needs ≈ 9.2); the
 * first makes it a suspect, probed every step, so the second follows ~1/q steps later. What the
 * start-up decides is when the first comes. For a fixed budget of start-up canaries, the expected
 * wait for it is smallest when they come first (the chance of having seen none, (1 − q)^t, falls
 * fastest), and a peer that passes the burst clean waits 1/(q·base) steps at the base rate. So the
 * expected steps to exclusion with a burst of N canaries at rate 1 are
 *     E(N) = (1 − (1 − q)^N)/q  +  (1 − q)^N/(q·base)  +  1/q,
 * and N is the smallest burst with E(N) ≤ `targetSteps` for the design tamper rate q
 * (`designTamperRate`, default 0.1; `targetSteps` default 80, a margin under the 100-step goal
 * for modes whose tampered canaries are not all far off, e.g. replay): 16 canaries at the
 * defaults. Canaries cost the same wherever they fall, so a new client's start-up overhead is set
 * by their number: a peer's first 256 steps now get ~23 (16 + the base rate), where a smoothly
 * decaying start (0.75, the excess halving every 6 canaries) spent ~32 and caught the 10 %
 * tamperer sooner (`npm run bench -- canary --adaptive`: mean 84 steps, was 62.5).
 * Decoys in flight (`inFlight`, default 4: DEFAULT_DECOYS_IN_FLIGHT; docs/verification.md on the
 * session leak that kept it at 1 for a while): below the evidence threshold (in the start-up burst, or
 * a suspect) a client keeps several decoy sessions of a peer going at once, each its own session
 * stepping once per real step, so the burst takes ~N/inFlight real steps instead of N. A peer sees
 * several sessions at once, as it does when several clients use it. The burst is then sized at
 * `start · inFlight` canaries per real step; with the target of 40 steps that is 24 canaries
 * (0.9^24 ≈ 0.08 of 10 % tamperers pass it clean, where 0.9^16 ≈ 0.19 did), spent in ~6 steps.
 */
export interface AdaptiveRateOptions {
  /** Canaries per real step for a peer with a clean record (default 0.03). */
  readonly base?: number
  /** Canaries per real step during a new peer's start-up burst (default 1). */
  readonly start?: number
  /** Length of the start-up burst in canaries; default derived from targetSteps (see above). */
  readonly startCanaries?: number
  /** Expected real steps to exclude a designTamperRate tamperer the burst is sized for (default 40). */
  readonly targetSteps?: number
  /** Fraction of steps tampered the burst is sized for (default 0.1). */
  readonly designTamperRate?: number
  /**
   * Decoy sessions of one peer in flight at once while it is below the evidence threshold
   * (start-up burst, suspect), each stepping at the rate above (default 4; 1 sends one at a time).
   */
  readonly inFlight?: number
  /** Posterior P(tampering) from which a peer is a suspect (default 0.1). */
  readonly suspectPosterior?: number
  /** Canaries per real step for a suspect (default 1). */
  readonly suspectRate?: number
}

/** What the rate depends on: a peer's detector verdict (PeerVerdict fits). */
export interface RateEvidence {
  readonly observations: number
  readonly posterior: number
  readonly excluded: boolean
}

export interface AdaptiveRate {
  readonly base: number
  readonly start: number
  /** Canaries of the start-up burst. */
  readonly startCanaries: number
  readonly suspectPosterior: number
  readonly suspectRate: number
  /** Decoy sessions in flight at once for a peer below the evidence threshold. */
  readonly inFlight: number
  /** Probability that a real step through this peer is followed by a canary step to it (per decoy in flight). */
  rateFor(evidence: RateEvidence): number
  /**
   * Decoy sessions of a peer to keep in flight: `inFlight` for a suspect, as many as its start-up
   * burst still needs up to `inFlight`, 1 after it, 0 once excluded. Each draws `rateFor`.
   */
  lanes(evidence: RateEvidence): number
}

const inUnit = (x: unknown): x is number => typeof x === 'number' && x > 0 && x <= 1

/**
 * Expected real steps until a peer tampering on a fraction q of steps is excluded, with a burst of
 * n canaries at rate `start` and the base rate after it (two tampered canaries convict; the
 * second comes at the suspect rate 1). See the comment above; start < 1 stretches the burst.
 */
export function expectedStepsToExclusion(n: number, q: number, base: number, start = 1): number {
  const clean = (1 - q) ** n
  return (1 - clean) / (q * start) + clean / (q * base) + 1 / q
}

/** The smallest burst (in canaries) whose expected steps to exclusion are within targetSteps; ≤ 1000. */
export function startCanariesFor(targetSteps: number, q: number, base: number, start = 1): number {
  for (let n = 0; n <= 1000; n++) if (expectedStepsToExclusion(n, q, base, start) <= targetSteps) return n
  throw new CanaryArgumentError(`no start-up burst reaches ${targetSteps} expected steps for tamper rate ${q}`)
}

export function createAdaptiveRate(options: AdaptiveRateOptions = {}): AdaptiveRate {
  const base = options.base ?? DEFAULT_CANARY_RATE
  const start = options.start ?? 1
  const suspectPosterior = options.suspectPosterior ?? 0.1
  const suspectRate = options.suspectRate ?? 1
  const targetSteps = options.targetSteps ?? 40
  const q = options.designTamperRate ?? 0.1
  const inFlight = options.inFlight ?? DEFAULT_DECOYS_IN_FLIGHT
  if (!(Number.isInteger(inFlight) && inFlight >= 1 && inFlight <= 16))
    throw new CanaryArgumentError(`inFlight must be an integer in [1, 16], got ${inFlight}`)
  if (!inUnit(base)) throw new CanaryArgumentError(`base rate must be in (0, 1], got ${base}`)
  if (!inUnit(start) || start < base) throw new CanaryArgumentError(`start rate must be in [base, 1], got ${start}`)
  if (!inUnit(suspectRate) || suspectRate < base)
    throw new CanaryArgumentError(`suspect rate must be in [base, 1], got ${suspectRate}`)
  if (!(typeof suspectPosterior === 'number' && suspectPosterior > 0 && suspectPosterior < 1)) {
    throw new CanaryArgumentError(`suspectPosterior must be in (0, 1), got ${suspectPosterior}`)
  }
  if (!inUnit(q) || q >= 1) throw new CanaryArgumentError(`designTamperRate must be in (0, 1), got ${q}`)
  if (!(typeof targetSteps === 'number' && targetSteps > 0 && Number.isFinite(targetSteps)))
    throw new CanaryArgumentError(`targetSteps must be a positive number of steps, got ${targetSteps}`)
  const startCanaries = options.startCanaries ?? startCanariesFor(targetSteps, q, base, start * inFlight)
  if (!(Number.isInteger(startCanaries) && startCanaries >= 0))
    throw new CanaryArgumentError(`startCanaries must be an integer ≥ 0, got ${startCanaries}`)
  return {
    base,
    start,
    startCanaries,
    suspectPosterior,
    suspectRate,
    inFlight,
    rateFor(e) {
      if (!e || !(e.observations >= 0) || !(e.posterior >= 0 && e.posterior <= 1))
        throw new CanaryArgumentError('rateFor needs observations ≥ 0 and a posterior in [0, 1]')
      if (e.excluded) return 0 // not routed through any more
      if (e.posterior >= suspectPosterior) return suspectRate
      return e.observations < startCanaries ? start : base
    },
    lanes(e) {
      if (e.excluded) return 0
      if (e.posterior >= suspectPosterior) return inFlight
      return Math.max(1, Math.min(inFlight, startCanaries - e.observations))
    }
  }
}

/** A fixed rate, as before adaptive rates (for comparisons). */
export function fixedRate(rate: number): AdaptiveRate {
  if (!inUnit(rate)) throw new CanaryArgumentError(`rate must be in (0, 1], got ${rate}`)
  return {
    base: rate,
    start: rate,
    startCanaries: 0,
    suspectPosterior: 0.999999,
    suspectRate: rate,
    inFlight: 1,
    rateFor: (e) => (e.excluded ? 0 : rate),
    lanes: (e) => (e.excluded ? 0 : 1)
  }
}
