import { describe, expect, it } from 'vitest'
import {
  CanaryArgumentError,
  createRandom,
  densityRatio,
  driftMetrics,
  fitDriftModel,
  InvalidDriftModelError,
  logDriftScore,
  parseDriftModel,
  serializeDriftModel
} from '../../canary/index.js'

/** Honest-looking drift: a reference row and the same row with Gaussian rounding-like noise of relative size `s`. */
function noisy(rnd: ReturnType<typeof createRandom>, s: number, n = 64) {
  const ref = Float32Array.from({ length: n }, () => rnd.normal())
  const out = ref.map((v) => v + s * rnd.normal())
  return { ref, out }
}

describe('drift features: the max-abs peak', () => {
  it('driftMetrics gives the peak as max |difference| over the reference RMS', () => {
    // reference (3, 4): RMS √12.5; output (3, 4.5): max |d| 0.5
    const d = driftMetrics([3, 4.5], [3, 4])
    expect(d.peak).toBeCloseTo(0.5 / Math.sqrt(12.5), 12)
    expect(driftMetrics([1, 0], [0, 0]).peak).toBe(Number.POSITIVE_INFINITY)
  })

  it('a 3-feature model scores a sparse change (one value moved) above benign noise of the same L2 size', () => {
    const rnd = createRandom(11)
    const samples = Array.from({ length: 600 }, (_, i) => {
      const { ref, out } = noisy(rnd, 1e-3)
      return { drift: driftMetrics(out, ref), kvLength: 1 + (i % 128), wire: 'f32' }
    })
    const model = fitDriftModel(samples, { features: ['relL2', 'chord', 'peak'] })
    expect(model.features).toEqual(['relL2', 'chord', 'peak'])
    expect(model.classes.f32.lower).toHaveLength(3)
    expect(model.classes.f32.points.length).toBe(model.classes.f32.weights.length * 3)
    // the same relL2 as benign noise, all of it in one value
    const { ref, out } = noisy(rnd, 1e-3)
    const benign = driftMetrics(out, ref)
    const sparse = Float32Array.from(ref)
    sparse[7] += benign.relL2 * Math.hypot(...ref)
    const spiky = driftMetrics(sparse, ref)
    expect(spiky.relL2).toBeCloseTo(benign.relL2, 6)
    expect(logDriftScore(model, spiky, 'f32', 64)).toBeGreaterThan(logDriftScore(model, benign, 'f32', 64) + 3)
    expect(densityRatio(model, spiky, 'f32', 64)).toBeGreaterThan(1)
    // without the peak the two look alike to a 2-feature model
    const two = fitDriftModel(samples)
    expect(two.features).toBeUndefined()
    expect(Math.abs(logDriftScore(two, spiky, 'f32', 64) - logDriftScore(two, benign, 'f32', 64))).toBeLessThan(3)
    // it survives serialisation, and needs drift records that carry the peak
    const back = parseDriftModel(serializeDriftModel(model))
    expect(back.features).toEqual(model.features)
    expect(() => densityRatio(back, { relL2: 1e-3, cosine: 1e-7, maxAbs: 1e-3 }, 'f32')).toThrow(CanaryArgumentError)
  })

  it('rejects unknown or repeated features', () => {
    const samples = Array.from({ length: 8 }, (_, i) => ({
      drift: { relL2: 1e-3 * (i + 1), cosine: 1e-7, maxAbs: 1e-3, peak: 3e-3 }
    }))
    expect(() => fitDriftModel(samples, { features: ['relL2', 'relL2'] })).toThrow(CanaryArgumentError)
    expect(() => fitDriftModel(samples, { features: ['nope' as 'peak'] })).toThrow(CanaryArgumentError)
    const ok = JSON.parse(serializeDriftModel(fitDriftModel(samples, { features: ['relL2', 'peak'] })))
    expect(() => parseDriftModel({ ...ok, features: ['relL2', 'chord', 'peak'] })).toThrow(InvalidDriftModelError)
  })
})
