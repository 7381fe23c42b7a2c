import type { Drift } from './drift.js'
import { type DriftModel, densityRatio, parseDriftModel } from './drift-model.js'
import { CanaryArgumentError } from './errors.js'

/*
 * Per-peer sequential test (Wald's SPRT) of H0 "benign" against H1_r "tampers on a fraction r
 * of steps". Under H1_r one canary's drift has density (1 − r)·f_B + r·f_T, so its likelihood
 * ratio is (1 − r) + r·f_T/f_B. The log-ratios add up per peer for every r of a grid, and the
 * generalized likelihood ratio Λ = max_r Λ_r (the rate unknown) turns the prior odds into
 * posterior odds. A peer is excluded once its posterior reaches the bound. By Ville's inequality
 * a benign peer ever reaches Λ_r ≥ A with probability ≤ 1/A for each r, hence ≤ |grid|/A overall
 * (prior 0.01, bound 0.99 → A = 99² and a false exclusion rate ≤ 6/9801 per benign peer, as long
 * as the benign model describes the peer).
 */
export const DEFAULT_RATES: readonly number[] = [0.02, 0.05, 0.1, 0.25, 0.5, 1]

export interface DetectorOptions {
  /** The benign drift model (fitDriftModel, or defaultBenignModel()). */
  readonly benign: DriftModel
  /** Prior probability that a peer tampers; default 0.01. */
  readonly prior?: number
  /** Posterior at which a peer is excluded; default 0.99. */
  readonly bound?: number
  /** Tamper rates r of the composite alternative; default DEFAULT_RATES. */
  readonly rates?: readonly number[]
}

export interface PeerVerdict {
  readonly peerId: string
  /** P(tampering | observations). */
  readonly posterior: number
  readonly excluded: boolean
  readonly observations: number
  /** log Λ = max over r of the summed log-likelihood ratios. */
  readonly logLikelihoodRatio: number
  /** The r that attains the maximum. */
  readonly rate: number
  /** Observations made when the peer was excluded. */
  readonly excludedAfter?: number
  /** The largest per-canary density ratio f_T/f_B seen (the most suspicious canary). */
  readonly maxDensityRatio: number
}

/** One peer's evidence, as `records()` gives it and `restore()` takes it back (a trust file). */
export interface DetectorRecord {
  readonly peerId: string
  /** Summed log-likelihood ratio per tamper rate of the detector's grid, in its order. */
  readonly sums: readonly number[]
  readonly observations: number
  readonly maxDensityRatio: number
  readonly excluded: boolean
  readonly excludedAfter?: number
}

export interface Detector {
  readonly prior: number
  readonly bound: number
  /** The tamper rates r of the composite alternative (a record's sums are in this order). */
  readonly rates: readonly number[]
  /**
   * Add one canary's drift for a peer (under wire dtype `wire`, when the model knows it), scored
   * against benign drift at the step's KV length `kvLength` (first position + rows) when given.
   */
  observe(peerId: string, drift: Drift, wire?: string, kvLength?: number): PeerVerdict
  posterior(peerId: string): number
  excluded(): string[]
  verdict(peerId: string): PeerVerdict
  report(): PeerVerdict[]
  /** Forget a peer's evidence (not its exclusion). */
  forget(peerId: string): void
  /** Every peer's evidence so far. */
  records(): DetectorRecord[]
  /**
   * Take back evidence from records() of a detector with the same benign model and rates (a
   * client carrying its peers' records across runs); a peer with evidence here keeps its own.
   * Throws CanaryArgumentError, restoring nothing, on a malformed record.
   */
  restore(records: readonly DetectorRecord[]): void
}

interface PeerState {
  readonly sums: Float64Array
  n: number
  excluded: boolean
  excludedAfter?: number
  maxRatio: number
}

const probability = (x: unknown): x is number => typeof x === 'number' && x > 0 && x < 1

export function createDetector(options: DetectorOptions): Detector {
  if (!options || typeof options !== 'object') throw new CanaryArgumentError('createDetector needs options')
  const benign = parseDriftModel(options.benign)
  const prior = options.prior ?? 0.01
  const bound = options.bound ?? 0.99
  if (!probability(prior)) throw new CanaryArgumentError(`prior must be in (0, 1), got ${prior}`)
  if (!probability(bound) || bound <= prior) throw new CanaryArgumentError(`bound must be in (prior, 1), got ${bound}`)
  const rates = [...(options.rates ?? DEFAULT_RATES)]
  if (rates.length === 0 || !rates.every((r) => typeof r === 'number' && r > 0 && r <= 1)) {
    throw new CanaryArgumentError('rates must be a non-empty list of numbers in (0, 1]')
  }
  const priorLogOdds = Math.log(prior / (1 - prior))
  const boundLogOdds = Math.log(bound / (1 - bound))
  // A log-ratio can drop no lower than log ε per canary (r = 1 and a drift below the benign bulk).
  const minLog = Math.log(benign.contamination)
  const peers = new Map<string, PeerState>()

  const checkId = (peerId: string): void => {
    if (typeof peerId !== 'string' || peerId.length === 0) throw new CanaryArgumentError('peerId must be a non-empty string')
  }
  const verdictOf = (peerId: string, s: PeerState | undefined): PeerVerdict => {
    if (!s)
      return {
        peerId,
        posterior: prior,
        excluded: false,
        observations: 0,
        logLikelihoodRatio: 0,
        rate: rates[0],
        maxDensityRatio: 0
      }
    let k = 0
    for (let i = 1; i < rates.length; i++) if (s.sums[i] > s.sums[k]) k = i
    const logOdds = priorLogOdds + s.sums[k]
    return {
      peerId,
      posterior: 1 / (1 + Math.exp(-logOdds)),
      excluded: s.excluded,
      observations: s.n,
      logLikelihoodRatio: s.sums[k],
      rate: rates[k],
      maxDensityRatio: s.maxRatio,
      ...(s.excludedAfter !== undefined ? { excludedAfter: s.excludedAfter } : {})
    }
  }

  const checkRecord = (r: DetectorRecord): void => {
    const count = (x: unknown): boolean => Number.isInteger(x) && (x as number) >= 0
    const ok =
      r &&
      typeof r.peerId === 'string' &&
      r.peerId.length > 0 &&
      Array.isArray(r.sums) &&
      r.sums.length === rates.length &&
      r.sums.every((v) => typeof v === 'number' && Number.isFinite(v)) &&
      count(r.observations) &&
      typeof r.maxDensityRatio === 'number' &&
      r.maxDensityRatio >= 0 &&
      typeof r.excluded === 'boolean' &&
      (r.excludedAfter === undefined || count(r.excludedAfter))
    if (!ok)
      throw new CanaryArgumentError(`malformed detector record${r && typeof r.peerId === 'string' ? ` for ${r.peerId}` : ''}`)
  }

  return {
    prior,
    bound,
    rates,
    observe(peerId, drift, wire, kvLength) {
      checkId(peerId)
      const ratio = densityRatio(benign, drift, wire, kvLength)
      let s = peers.get(peerId)
      if (!s) peers.set(peerId, (s = { sums: new Float64Array(rates.length), n: 0, excluded: false, maxRatio: 0 }))
      for (let i = 0; i < rates.length; i++) s.sums[i] += Math.max(minLog, Math.log(1 - rates[i] + rates[i] * ratio))
      s.n++
      s.maxRatio = Math.max(s.maxRatio, ratio)
      let best = s.sums[0]
      for (let i = 1; i < rates.length; i++) best = Math.max(best, s.sums[i])
      if (!s.excluded && priorLogOdds + best >= boundLogOdds) {
        s.excluded = true
        s.excludedAfter = s.n
      }
      return verdictOf(peerId, s)
    },
    posterior(peerId) {
      checkId(peerId)
      return verdictOf(peerId, peers.get(peerId)).posterior
    },
    excluded() {
      return [...peers].filter(([, s]) => s.excluded).map(([id]) => id)
    },
    verdict(peerId) {
      checkId(peerId)
      return verdictOf(peerId, peers.get(peerId))
    },
    report() {
      return [...peers].map(([id, s]) => verdictOf(id, s))
    },
    forget(peerId) {
      const s = peers.get(peerId)
      if (!s) return
      s.sums.fill(0)
      s.n = 0
      s.maxRatio = 0
    },
    records() {
      return [...peers].map(([peerId, s]) => ({
        peerId,
        sums: [...s.sums],
        observations: s.n,
        maxDensityRatio: s.maxRatio,
        excluded: s.excluded,
        ...(s.excludedAfter !== undefined ? { excludedAfter: s.excludedAfter } : {})
      }))
    },
    restore(records) {
      if (!Array.isArray(records)) throw new CanaryArgumentError('records must be an array')
      for (const r of records) checkRecord(r)
      for (const r of records) {
        if (peers.has(r.peerId)) continue
        peers.set(r.peerId, {
          sums: Float64Array.from(r.sums),
          n: r.observations,
          excluded: r.excluded,
          maxRatio: r.maxDensityRatio,
          ...(r.excludedAfter !== undefined ? { excludedAfter: r.excludedAfter } : {})
        })
      }
    }
  }
}
