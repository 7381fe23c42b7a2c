import { CanaryArgumentError } from './errors.js'

/*
 * Per-peer canary rate, trust on evidence. A smooth form of Dodge's continuous sampling plan
 * (CSP-1, Dodge 1943; MIL-STD-1235): inspect densely until a run of clean units has been seen,
 * then only a fraction, and go back to dense inspection as soon as a unit looks bad.
 *  - A peer never checked is probed at `start` (default 0.75 canaries per real step); the excess
 *    over `base` halves every `halfLife` canaries it answers, so a peer that has passed ~30 checks
 *    is probed at about the base rate (default 0.03).
 *  - A peer whose posterior P(tampering) reaches `suspectPosterior` (default 0.1: one canary with a
 *    drift far outside the benign spread) is probed at `suspectRate` (default 1, every step) until
 *    the evidence either convicts it or falls back below the threshold.
 * Why this keeps the detector's guarantees: which steps get a canary depends only on canaries
 * already scored (a predictable sampling rule), so the likelihood ratio of the canaries observed
 * is still a nonnegative supermartingale under "benign" and Ville's inequality bounds a benign
 * peer's chance of ever reaching the exclusion bound exactly as at a fixed rate (optional
 * sampling; cf. Wald 1947 §3 on sequential tests with data-dependent sampling).
 * Why dense at the start: a peer tampering on a fraction q of steps shows a tampered canary every
 * 1/(q·rate) real steps; two of them convict it (one canary moves the log-likelihood ratio by at
 * most 8, the bound needs ≈9.2), so at a fixed 0.03 a 10 % tamperer stays ~700 steps.
 */
export interface AdaptiveRateOptions {
  /** Canaries per real step for a peer with a long clean record (default 0.03). */
  readonly base?: number
  /** Canaries per real step for a peer never checked (default 0.75). */
  readonly start?: number
  /** Canaries after which the start-up excess over `base` halves (default 6). */
  readonly halfLife?: number
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
  readonly halfLife: number
  readonly suspectPosterior: number
  readonly suspectRate: number
  /** Probability that a real step through this peer is followed by a canary step to it. */
  rateFor(evidence: RateEvidence): number
}

const inUnit = (x: unknown): x is number => typeof x === 'number' && x > 0 && x <= 1

export function createAdaptiveRate(options: AdaptiveRateOptions = {}): AdaptiveRate {
  const base = options.base ?? 0.03
  const start = options.start ?? Math.max(0.75, base)
  const halfLife = options.halfLife ?? 6
  const suspectPosterior = options.suspectPosterior ?? 0.1
  const suspectRate = options.suspectRate ?? 1
  if (!inUnit(base)) throw new CanaryArgumentError(`base rate must be in (0, 1], got ${base}`)
  if (!inUnit(start) || start < base) throw new CanaryArgumentError(`start rate must be in [base, 1], got ${start}`)
  if (!inUnit(suspectRate) || suspectRate < base)
    throw new CanaryArgumentError(`suspect rate must be in [base, 1], got ${suspectRate}`)
  if (!(typeof halfLife === 'number' && halfLife > 0 && Number.isFinite(halfLife)))
    throw new CanaryArgumentError(`halfLife must be a positive number of canaries, got ${halfLife}`)
  if (!(typeof suspectPosterior === 'number' && suspectPosterior > 0 && suspectPosterior < 1)) {
    throw new CanaryArgumentError(`suspectPosterior must be in (0, 1), got ${suspectPosterior}`)
  }
  return {
    base,
    start,
    halfLife,
    suspectPosterior,
    suspectRate,
    rateFor(e) {
      if (!e || !(e.observations >= 0) || !(e.posterior >= 0 && e.posterior <= 1))
        throw new CanaryArgumentError('rateFor needs observations ≥ 0 and a posterior in [0, 1]')
      if (e.excluded) return 0 // not routed through any more
      if (e.posterior >= suspectPosterior) return suspectRate
      return base + (start - base) * 2 ** (-e.observations / halfLife)
    }
  }
}

/** A fixed rate, as before adaptive rates (for comparisons). */
export function fixedRate(rate: number): AdaptiveRate {
  if (!inUnit(rate)) throw new CanaryArgumentError(`rate must be in (0, 1], got ${rate}`)
  return {
    base: rate,
    start: rate,
    halfLife: 1,
    suspectPosterior: 0.999999,
    suspectRate: rate,
    rateFor: (e) => (e.excluded ? 0 : rate)
  }
}
