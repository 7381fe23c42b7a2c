import { type Drift, validateDrift } from './drift.js'
import { type DriftFeature, type KernelShape, kdeSum, kernelNorm, kernelShape, scaledDist2 } from './drift-kernel.js'
import { CanaryArgumentError, InvalidDriftModelError } from './errors.js'

/*
 * Benign and tampering drift distributions in log-drift space. A drift becomes two features,
 * x = (log10 relL2, log10 chord) with chord = √(2·cosine) = ‖â − b̂‖ (the same scale as relL2),
 * each floored at 1e-10 (exact zeros from identical kernels land on the floor) and capped at 1e2.
 *  - Benign: a Gaussian kernel density estimate (Rosenblatt–Parzen) over calibration samples, one
 *    per wire dtype plus a pooled one, bandwidth chosen by leave-one-out likelihood
 *    cross-validation (Duin 1976; exact ties left out too, so point masses do not force h → 0).
 *  - Tampering: uniform over the feature box minus the corner where both features lie below the
 *    benign bulk (a peer cannot be closer to the reference than benign variation by tampering).
 * The benign density is contaminated with a fraction ε of the tampering one (Huber's ε-contamination),
 * so one observation's density ratio f_T/f_B is at most 1/ε: a single outlier never convicts.
 * Benign drift grows with the step's position (rounding error accumulates over a longer KV
 * cache: over 256-position canaries the f32 spread goes from ~8e-4 early to ~1.2e-3 late), so a
 * pooled model is too wide early and hides small tampering there. Each class therefore holds a
 * log-scale shift per position bucket (log2 of the KV length after the step): features are
 * moved by −shift(bucket) before the density is fitted or evaluated, i.e. drift is scored
 * relative to the benign drift at its own position (a scale model in log space, as in GAMLSS-style
 * scale regression). The shift is taken at the upper tail (the 99th percentile per bucket), not
 * the median: benign drift is a mixture (exact-ish kernels near 1e-7, other kernels near 1e-3),
 * its median does not move with position, and only the tail, which bounds what can be told
 * apart from tampering, does.
 * A model may add a third feature, log10 peak (max |output − reference| over the reference RMS,
 * `features`): sparse tampering (a few values zeroed, coarse rounding of large values) moves the
 * largest difference far more than the L2 norm; the density is then a 3-D product-kernel KDE and
 * the tampering density uniform over the 3-D box (same construction, one more dimension).
 * Benign drift is noise in no preferred direction, so its relative L2 and its chord are nearly
 * equal: the benign cloud is a thin band along the diagonal relL2 = chord, decades long and
 * ~0.01 decades wide. An isotropic kernel narrow enough for the band's width gives its far end
 * no mass, and far-off drifts then rank by the distance to the nearest calibration point,
 * whatever their direction: an honest outlier on the diagonal (larger noise) can outrank a
 * tampering that moved relL2 alone (scale). The kernel therefore has its own bandwidth along the
 * diagonal (`diagonalBandwidth`, a bandwidth matrix with the diagonal as one principal axis, as
 * in Wand & Jones 1993), both chosen by the same cross-validation.
 */
export type { DriftFeature }
export const DEFAULT_FEATURES: readonly DriftFeature[] = ['relL2', 'chord']
const FEATURE_NAMES: readonly DriftFeature[] = ['relL2', 'chord', 'peak']
export const LOG_FLOOR = -10
export const LOG_CEIL = 2
export const MIN_BANDWIDTH = 0.05

export interface DriftSample {
  readonly drift: Drift
  /** KV length after the step (its first position + rows); unknown when absent. */
  readonly kvLength?: number
  /** Wire dtype (or any context key) the sample was measured under; the pooled class only when absent. */
  readonly wire?: string
}

export interface DriftClass {
  /** Distinct feature points of non-zero drifts, flattened tuples [x1, y1, (z1,) x2, y2, ...]. */
  readonly points: number[]
  /** Weight of each point (its share of the non-zero samples). */
  readonly weights: number[]
  /** Share of samples with drift exactly 0 (identical outputs). */
  readonly atom: number
  /** Kernel bandwidth (log10 units); across the relL2 = chord diagonal when diagonalBandwidth is set. */
  readonly bandwidth: number
  /** Bandwidth along the diagonal relL2 = chord (both features present); absent: isotropic. */
  readonly diagonalBandwidth?: number
  /** Lower edge of the benign bulk per feature (1st percentile of non-zero drifts minus one bandwidth). */
  readonly lower: number[]
  /** Samples the class was fitted on (points may be a thinned subset). */
  readonly count: number
  /**
   * log10 shift of benign drift per position bucket (positionBucket: ⌊log2 (kvLength − 1)⌋; index = bucket; the last
   * entry serves longer ones), relative to the class's overall median. Absent: no position model.
   */
  readonly positionShift?: number[]
}

export interface DriftModel {
  readonly version: 1
  readonly kind: 'log-drift-kde'
  /** ε of the contamination: the benign density holds ε of the tampering one. */
  readonly contamination: number
  /** Per wire dtype, and '*' pooled over all samples (used for unknown keys). */
  readonly classes: Readonly<Record<string, DriftClass>>
  /** Features of a drift the density is over (default relL2 and chord). */
  readonly features?: readonly DriftFeature[]
  readonly note?: string
}

/**
 * The position bucket of a step: ⌊log2⌋ of its last row's position, kvLength − 1 (0 and 1 are
 * bucket 0). By the last position rather than the length, a canary of 2^k positions fills
 * buckets 0 .. k−1 and no bucket holds its final step alone: such a bucket has 1/128 of the
 * samples of its neighbour, and its noisy 99th percentile made kvLength 256 1.5× more lenient
 * than 128–255 on stories260K's 256-position canaries.
 */
export const positionBucket = (kvLength: number): number => Math.floor(Math.log2(Math.max(1, kvLength - 1)))

/** The shift of a class at a KV length; unknown lengths get the largest (the most lenient). */
export function shiftAt(c: DriftClass, kvLength: number | undefined): number {
  const sh = c.positionShift
  if (!sh || sh.length === 0) return 0
  if (kvLength === undefined || !Number.isFinite(kvLength)) return Math.max(...sh)
  return sh[Math.min(sh.length - 1, positionBucket(kvLength))]
}

const clampLog = (v: number): number => Math.min(LOG_CEIL, Math.max(LOG_FLOOR, Math.log10(Math.max(v, 10 ** LOG_FLOOR))))

/** The log-drift features of a drift record (relL2 and chord by default). */
export function driftFeatures(d: Drift, features: readonly DriftFeature[] = DEFAULT_FEATURES): number[] {
  return features.map((f) => {
    if (f === 'relL2') return clampLog(d.relL2)
    if (f === 'chord') return clampLog(Math.sqrt(2 * d.cosine))
    if (d.peak === undefined) throw new CanaryArgumentError('this drift model needs the drift peak (driftMetrics gives it)')
    return clampLog(d.peak)
  })
}

/** The kernel of a class under a model's features. */
export const classKernel = (c: DriftClass, features?: readonly DriftFeature[]): KernelShape =>
  kernelShape(c.bandwidth, c.diagonalBandwidth, features ?? DEFAULT_FEATURES)

export function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.floor(q * (sorted.length - 1))))]
}

export const isAtom = (f: readonly number[]): boolean => f.every((v) => v === LOG_FLOOR)
export const meanOf = (f: readonly number[]): number => f.reduce((a, b) => a + b, 0) / f.length

export function checkFeatures(f: unknown, E: new (m: string) => Error): void {
  const ok = Array.isArray(f) && f.length >= 1 && f.every((x) => FEATURE_NAMES.includes(x)) && new Set(f).size === f.length
  if (!ok) throw new E(`features must be distinct names of ${FEATURE_NAMES.join(', ')}`)
}

/** The uniform tampering density over the feature box minus the corner below the benign bulk, and whether `x` is in its region. */
function tamperDensity(c: DriftClass, x: readonly number[]): { logFT: number; inRegion: boolean } {
  const span = LOG_CEIL - LOG_FLOOR
  let corner = 1
  for (let d = 0; d < x.length; d++) corner *= Math.max(0, c.lower[d] - LOG_FLOOR) / span
  return { logFT: -x.length * Math.log(span) - Math.log(1 - corner), inRegion: x.some((v, d) => v >= c.lower[d]) }
}

function classOf(model: DriftModel, wire: string | undefined): DriftClass {
  return (wire !== undefined && model.classes[wire]) || model.classes['*']
}

/**
 * The density ratio f_T(x)/f_B(x) of one drift under the model, in [0, 1/ε]: above 1 the
 * drift looks more like tampering than like benign variation. `kvLength` (the step's first
 * position + rows) scores it against benign drift at that position; without it the most
 * lenient position is assumed.
 */
export function densityRatio(model: DriftModel, drift: Drift, wire?: string, kvLength?: number): number {
  validateDrift(drift)
  if (kvLength !== undefined && !(typeof kvLength === 'number' && kvLength >= 0))
    throw new CanaryArgumentError('kvLength must be a number ≥ 0')
  const c = classOf(model, wire)
  const x0 = driftFeatures(drift, model.features)
  // An exact reproduction of the reference is no evidence of tampering.
  if (isAtom(x0)) return 0
  const shift = shiftAt(c, kvLength)
  const x = x0.map((v) => v - shift)
  const t = tamperDensity(c, x)
  const fT = t.inRegion ? Math.exp(t.logFT) : 0
  const ks = classKernel(c, model.features)
  const kde = c.points.length > 0 ? kdeSum(c.points, c.weights, x, ks) / kernelNorm(ks, x.length) : 0
  const eps = model.contamination
  const fB = (1 - c.atom) * (1 - eps) * kde + eps * fT
  return fB > 0 ? fT / fB : 0
}

/**
 * The per-canary score before the ε cap: log f_T(x) − log((1 − atom)·f_B(x)) at the step's
 * position, with the benign kernel density summed in log space (log-sum-exp), so it stays finite
 * and keeps growing with the distance from benign drift where exp() would underflow. The
 * sequential test clamps each canary's ratio at 1/ε (densityRatio) so that one outlier never
 * convicts; that clamp makes every far-off drift tie at the cap, honest outliers and gross
 * tampering alike, which a ranking measure (AUROC) would count as inseparable although the
 * statistic orders them. −∞ for an exact reproduction or a drift below the benign bulk.
 */
export function logDriftScore(model: DriftModel, drift: Drift, wire?: string, kvLength?: number): number {
  validateDrift(drift)
  const c = classOf(model, wire)
  const x0 = driftFeatures(drift, model.features)
  if (isAtom(x0)) return Number.NEGATIVE_INFINITY
  const shift = shiftAt(c, kvLength)
  const x = x0.map((v) => v - shift)
  const { logFT, inRegion } = tamperDensity(c, x)
  if (!inRegion) return Number.NEGATIVE_INFINITY
  const ks = classKernel(c, model.features)
  let top = Number.NEGATIVE_INFINITY
  const terms: number[] = []
  for (let k = 0; k < c.weights.length; k++) {
    const t = Math.log(c.weights[k]) - 0.5 * scaledDist2(c.points, k, x, ks)
    terms.push(t)
    if (t > top) top = t
  }
  if (!Number.isFinite(top)) return Number.POSITIVE_INFINITY
  let sum = 0
  for (const t of terms) sum += Math.exp(t - top)
  const logKde = top + Math.log(sum) - Math.log(kernelNorm(ks, x.length))
  return logFT - Math.log(Math.max(1e-300, 1 - c.atom)) - logKde
}

/** Parse and check a drift model from JSON text or a parsed object (a shipped calibration). */
export function parseDriftModel(json: string | unknown): DriftModel {
  let m: DriftModel
  try {
    m = (typeof json === 'string' ? JSON.parse(json) : json) as DriftModel
  } catch (e) {
    throw new InvalidDriftModelError('drift model is not valid JSON', { cause: e })
  }
  if (m?.version !== 1 || m.kind !== 'log-drift-kde') throw new InvalidDriftModelError('not a version 1 log-drift-kde model')
  if (!(m.contamination > 0 && m.contamination < 0.5)) throw new InvalidDriftModelError('contamination must be in (0, 0.5)')
  if (!m.classes || typeof m.classes !== 'object' || !m.classes['*'])
    throw new InvalidDriftModelError('the pooled class "*" is missing')
  if (m.features !== undefined) checkFeatures(m.features, InvalidDriftModelError)
  const dims = (m.features ?? DEFAULT_FEATURES).length
  for (const [k, c] of Object.entries(m.classes)) {
    const ok =
      c &&
      Array.isArray(c.points) &&
      c.points.length % dims === 0 &&
      Array.isArray(c.weights) &&
      c.weights.length * dims === c.points.length &&
      c.weights.every((w) => typeof w === 'number' && w >= 0) &&
      c.atom >= 0 &&
      c.atom <= 1 &&
      c.points.every((v) => typeof v === 'number' && Number.isFinite(v)) &&
      c.bandwidth > 0 &&
      (c.diagonalBandwidth === undefined || (typeof c.diagonalBandwidth === 'number' && c.diagonalBandwidth > 0)) &&
      Array.isArray(c.lower) &&
      c.lower.length === dims &&
      c.lower.every(Number.isFinite) &&
      Number.isInteger(c.count) &&
      (c.positionShift === undefined ||
        (Array.isArray(c.positionShift) && c.positionShift.length > 0 && c.positionShift.every((v) => Number.isFinite(v))))
    if (!ok) throw new InvalidDriftModelError(`class ${k} is malformed`)
  }
  return m
}

/** JSON text of a drift model, points rounded to 4 decimals (what a client ships). */
export function serializeDriftModel(model: DriftModel): string {
  const classes = Object.fromEntries(
    Object.entries(model.classes).map(([k, c]) => [k, { ...c, points: c.points.map((v) => Math.round(v * 1e4) / 1e4) }])
  )
  return JSON.stringify({ ...model, classes })
}
