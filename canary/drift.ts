import { CanaryArgumentError } from './errors.js'

/** How far a peer's output is from the reference output of the same canary step. */
export interface Drift {
  /** ‖output − reference‖₂ / ‖reference‖₂ (0 when both are zero). */
  readonly relL2: number
  /** Cosine distance 1 − cos(output, reference), in [0, 2]. */
  readonly cosine: number
  /** max |output − reference| over all values. */
  readonly maxAbs: number
  /**
   * maxAbs over the reference's RMS: a sparse-tampering statistic (one altered value moves it by
   * its own size, where relL2 spreads it over every value). Absent in records made before it.
   */
  readonly peak?: number
}

function norm(x: ArrayLike<number>): number {
  let s = 0
  for (let i = 0; i < x.length; i++) s += x[i] * x[i]
  return Math.sqrt(s)
}

/**
 * Drift metrics of `output` against `reference` (same length, finite values), in double
 * precision. The cosine distance is computed as ½‖a/‖a‖ − b/‖b‖‖² (equal to 1 − cos), which
 * stays accurate for nearly parallel vectors where 1 − a·b/(‖a‖‖b‖) cancels to rounding noise.
 * A zero vector against a non-zero one has cosine distance 1 (orthogonal); two zeros have 0.
 */
export function driftMetrics(output: ArrayLike<number>, reference: ArrayLike<number>): Drift {
  if (!output || !reference || typeof output.length !== 'number' || typeof reference.length !== 'number') {
    throw new CanaryArgumentError('driftMetrics needs two arrays of numbers')
  }
  if (output.length !== reference.length) {
    throw new CanaryArgumentError(`output has ${output.length} values, the reference ${reference.length}`)
  }
  if (output.length === 0) throw new CanaryArgumentError('driftMetrics needs at least one value')
  for (let i = 0; i < output.length; i++) {
    if (!Number.isFinite(reference[i])) throw new CanaryArgumentError(`reference value ${i} is not finite`)
  }
  const na = norm(output)
  const nb = norm(reference)
  let diff = 0
  let maxAbs = 0
  let chord = 0
  let finite = true
  for (let i = 0; i < output.length; i++) {
    const a = output[i]
    const b = reference[i]
    if (!Number.isFinite(a)) finite = false
    const d = a - b
    diff += d * d
    if (Math.abs(d) > maxAbs) maxAbs = Math.abs(d)
    if (na > 0 && nb > 0) {
      const c = a / na - b / nb
      chord += c * c
    }
  }
  // A non-finite output (NaN, ±Inf) is as far from the reference as drift can be measured.
  if (!finite)
    return { relL2: Number.POSITIVE_INFINITY, cosine: 2, maxAbs: Number.POSITIVE_INFINITY, peak: Number.POSITIVE_INFINITY }
  const relL2 = nb > 0 ? Math.sqrt(diff) / nb : na > 0 ? Number.POSITIVE_INFINITY : 0
  const cosine = na > 0 && nb > 0 ? Math.min(2, chord / 2) : na === 0 && nb === 0 ? 0 : 1
  const rms = nb / Math.sqrt(output.length)
  const peak = rms > 0 ? maxAbs / rms : maxAbs > 0 ? Number.POSITIVE_INFINITY : 0
  return { relL2, cosine, maxAbs, peak }
}

/** Throws CanaryArgumentError unless `d` is a drift record with non-negative numbers. */
export function validateDrift(d: Drift): void {
  if (!d || typeof d !== 'object') throw new CanaryArgumentError('drift must be an object')
  for (const k of ['relL2', 'cosine', 'maxAbs'] as const) {
    if (typeof d[k] !== 'number' || Number.isNaN(d[k]) || d[k] < 0) {
      throw new CanaryArgumentError(`drift ${k} must be a number ≥ 0, got ${d[k]}`)
    }
  }
  if (d.peak !== undefined && (typeof d.peak !== 'number' || Number.isNaN(d.peak) || d.peak < 0))
    throw new CanaryArgumentError(`drift peak must be a number ≥ 0, got ${d.peak}`)
}
