/**
 * Fitting the benign drift model (drift-model.ts) to calibration samples: per wire class and
 * pooled, a position shift per KV-length bucket, then a Gaussian KDE over the shifted features
 * with its bandwidth chosen by leave-one-out likelihood cross-validation (Duin 1976).
 */
import { validateDrift } from './drift.js'
import { kdeSum, kernelNorm, kernelShape } from './drift-kernel.js'
import {
  checkFeatures,
  DEFAULT_FEATURES,
  type DriftClass,
  type DriftFeature,
  type DriftModel,
  type DriftSample,
  driftFeatures,
  isAtom,
  LOG_CEIL,
  MIN_BANDWIDTH,
  meanOf,
  positionBucket,
  quantile,
  shiftAt
} from './drift-model.js'
import { CanaryArgumentError } from './errors.js'
import { createRandom } from './rng.js'

export interface FitOptions {
  /** Default e^-8 ≈ 3.4e-4: one canary moves the log-likelihood ratio by at most 8. */
  readonly contamination?: number
  /** Points kept per class (seeded thinning); default 400. */
  readonly maxPoints?: number
  readonly seed?: number
  readonly note?: string
  /** Samples a KV-length bucket needs for its own shift (others borrow the nearest); default 200. */
  readonly minBucketSamples?: number
  /** Quantile of log drift per bucket the position shift is measured at; default 0.99. */
  readonly positionQuantile?: number
  /** Features to fit the density over (default DEFAULT_FEATURES). */
  readonly features?: readonly DriftFeature[]
}

/**
 * Per-bucket log shift: the q-quantile of the mean log feature in each KV-length bucket minus the
 * class's own (non-zero drifts only); buckets with too few samples take the nearest filled one.
 */
function fitShift(features: number[][], kv: (number | undefined)[], minSamples: number, q: number): number[] | undefined {
  const byBucket: number[][] = []
  const all: number[] = []
  features.forEach((f, i) => {
    const k = kv[i]
    if (k === undefined || isAtom(f)) return
    const b = positionBucket(k)
    ;(byBucket[b] ??= []).push(meanOf(f))
    all.push(meanOf(f))
  })
  if (all.length < minSamples) return undefined
  const med = (v: number[]): number =>
    quantile(
      [...v].sort((a, b) => a - b),
      q
    )
  const center = med(all)
  const own = Array.from(byBucket, (v) => (v && v.length >= minSamples ? med(v) - center : undefined))
  const filled = own.map((_, b) => {
    for (let d = 0; d < own.length; d++) {
      const v = own[b - d] ?? own[b + d]
      if (v !== undefined) return Math.round(v * 1e4) / 1e4
    }
    return 0
  })
  return filled.length > 0 ? filled : undefined
}

function fitClass(
  raw: number[][],
  kv: (number | undefined)[],
  maxPoints: number,
  seed: number,
  pos: { minSamples: number; q: number },
  names: readonly DriftFeature[]
): DriftClass {
  const positionShift = fitShift(raw, kv, pos.minSamples, pos.q)
  const shifted = { positionShift } as DriftClass
  // Features relative to the benign drift at their own position (exact zeros stay on the floor).
  const features = raw.map((f, i): number[] => {
    if (isAtom(f)) return f
    const d = shiftAt(shifted, kv[i])
    return f.map((v) => v - d)
  })
  const dims = raw[0]?.length ?? 2
  // Exact reproductions (drift 0, every feature on the floor) are an atom, not a density.
  const rest = features.filter((f) => !isAtom(f))
  const atom = (features.length - rest.length) / features.length
  // Identical points (e.g. two thread counts giving the same bits) merge into one weighted point.
  const counts = new Map<string, { f: number[]; w: number }>()
  for (const f of rest) {
    const key = f.join(',')
    const e = counts.get(key)
    if (e) e.w++
    else counts.set(key, { f, w: 1 })
  }
  let kept = [...counts.values()]
  if (kept.length > maxPoints) {
    const rnd = createRandom(seed)
    for (let i = kept.length - 1; i > 0; i--) {
      const j = rnd.int(i + 1)
      ;[kept[i], kept[j]] = [kept[j], kept[i]]
    }
    kept = kept.slice(0, maxPoints)
  }
  const total = kept.reduce((n, e) => n + e.w, 0)
  const points = kept.flatMap((e) => e.f)
  const weights = kept.map((e) => e.w / total)
  let best = MIN_BANDWIDTH
  let bestDiag: number | undefined
  let bestScore = Number.NEGATIVE_INFINITY
  if (kept.length > 2) {
    // Leave-one-out likelihood cross-validation over the distinct points, jointly over the
    // bandwidth and (when relL2 and chord are both features) the one along their diagonal.
    const pair = names.includes('relL2') && names.includes('chord')
    for (let h = MIN_BANDWIDTH; h <= 2; h *= 1.25) {
      for (let ratio = 1; ratio <= (pair ? 64 : 1); ratio *= 1.5) {
        const ks = kernelShape(h, pair ? h * ratio : undefined, names)
        let score = 0
        kept.forEach((e, i) => {
          const f = kdeSum(points, weights, e.f, ks, i) / ((1 - weights[i]) * kernelNorm(ks, dims))
          score += weights[i] * Math.log(f + 1e-300)
        })
        if (score > bestScore) {
          bestScore = score
          best = h
          bestDiag = pair ? h * ratio : undefined
        }
      }
    }
  }
  const lower = Array.from({ length: dims }, (_, d) =>
    rest.length === 0
      ? LOG_CEIL
      : quantile(
          rest.map((f) => f[d]).sort((a, b) => a - b),
          0.01
        ) - best
  )
  return {
    points,
    weights: weights.map((w) => Math.round(w * 1e6) / 1e6),
    bandwidth: best,
    ...(bestDiag !== undefined ? { diagonalBandwidth: Math.round(bestDiag * 1e4) / 1e4 } : {}),
    lower,
    atom,
    count: features.length,
    ...(positionShift ? { positionShift } : {})
  }
}

/** Fit the benign drift model to calibration samples (at least 8), per wire key and pooled. */
export function fitDriftModel(samples: readonly DriftSample[], options: FitOptions = {}): DriftModel {
  if (!Array.isArray(samples) || samples.length < 8) throw new CanaryArgumentError('fitDriftModel needs at least 8 samples')
  const contamination = options.contamination ?? Math.exp(-8)
  if (!(contamination > 0 && contamination < 0.5)) throw new CanaryArgumentError('contamination must be in (0, 0.5)')
  const maxPoints = options.maxPoints ?? 400
  if (!Number.isInteger(maxPoints) || maxPoints < 8) throw new CanaryArgumentError('maxPoints must be an integer ≥ 8')
  const seed = options.seed ?? 1
  const features = [...(options.features ?? DEFAULT_FEATURES)]
  checkFeatures(features, CanaryArgumentError)
  const pos = { minSamples: options.minBucketSamples ?? 200, q: options.positionQuantile ?? 0.99 }
  if (!(pos.q > 0 && pos.q < 1)) throw new CanaryArgumentError('positionQuantile must be in (0, 1)')
  const groups = new Map<string, { f: number[][]; kv: (number | undefined)[] }>([['*', { f: [], kv: [] }]])
  for (const s of samples) {
    validateDrift(s?.drift)
    if (s.kvLength !== undefined && !(Number.isInteger(s.kvLength) && s.kvLength >= 1))
      throw new CanaryArgumentError('sample kvLength must be an integer ≥ 1')
    const f = driftFeatures(s.drift, features)
    groups.get('*')!.f.push(f)
    groups.get('*')!.kv.push(s.kvLength)
    if (s.wire !== undefined) {
      if (typeof s.wire !== 'string' || s.wire === '*')
        throw new CanaryArgumentError('sample wire must be a string other than "*"')
      if (!groups.has(s.wire)) groups.set(s.wire, { f: [], kv: [] })
      groups.get(s.wire)!.f.push(f)
      groups.get(s.wire)!.kv.push(s.kvLength)
    }
  }
  const classes: Record<string, DriftClass> = {}
  for (const [key, g] of groups) if (g.f.length >= 8) classes[key] = fitClass(g.f, g.kv, maxPoints, seed, pos, features)
  const custom = features.join() !== DEFAULT_FEATURES.join() ? { features } : {}
  return { version: 1, kind: 'log-drift-kde', contamination, classes, ...custom, ...(options.note ? { note: options.note } : {}) }
}
