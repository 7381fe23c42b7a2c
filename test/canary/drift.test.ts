import { describe, expect, it } from 'vitest'
import { auroc, CanaryArgumentError, driftMetrics, wireRoundtrip } from '../../canary/index.js'

describe('driftMetrics', () => {
  it('gives known answers', () => {
    // ‖(3,4) − (0,0)‖... reference (3,4), output (3,4)·1.1: relL2 = 0.1, cosine 0, maxAbs 0.4
    const d = driftMetrics([3.3, 4.4], [3, 4])
    expect(d.relL2).toBeCloseTo(0.1, 12)
    expect(d.cosine).toBeCloseTo(0, 12)
    expect(d.maxAbs).toBeCloseTo(0.4, 12)
    // orthogonal unit vectors: relL2 √2, cosine distance 1, maxAbs 1
    const o = driftMetrics([0, 1], [1, 0])
    expect(o.relL2).toBeCloseTo(Math.SQRT2, 12)
    expect(o.cosine).toBeCloseTo(1, 12)
    expect(o.maxAbs).toBe(1)
    // opposite: cosine distance 2
    expect(driftMetrics([-1, -2], [1, 2]).cosine).toBeCloseTo(2, 12)
    expect(driftMetrics([1, 2], [1, 2])).toEqual({ relL2: 0, cosine: 0, maxAbs: 0, peak: 0 })
  })
  it('keeps the cosine distance accurate for nearly parallel vectors', () => {
    // angle θ = 1e-8: 1 − cos θ = θ²/2 = 5e-17, below double rounding of 1 − a·b/(‖a‖‖b‖)
    const t = 1e-8
    expect(driftMetrics([Math.cos(t), Math.sin(t)], [1, 0]).cosine).toBeCloseTo(5e-17, 25)
  })
  it('treats non-finite outputs as maximal drift and validates inputs', () => {
    expect(driftMetrics([Number.NaN, 1], [1, 1]).relL2).toBe(Number.POSITIVE_INFINITY)
    expect(() => driftMetrics([1], [1, 2])).toThrow(CanaryArgumentError)
    expect(() => driftMetrics([], [])).toThrow(CanaryArgumentError)
    expect(() => driftMetrics([1], [Number.NaN])).toThrow(CanaryArgumentError)
  })
})

describe('wireRoundtrip and auroc', () => {
  it('rounds to f16 and Q8_0 with known errors', () => {
    const x = Float32Array.from({ length: 64 }, (_, i) => (i - 32) / 7)
    expect(wireRoundtrip(x, 64, 'f32')).toEqual(x)
    const h = wireRoundtrip(x, 64, 'f16')
    for (let i = 0; i < 64; i++) expect(Math.abs(h[i] - x[i])).toBeLessThanOrEqual(Math.abs(x[i]) * 2 ** -11 + 1e-7)
    const q = wireRoundtrip(x, 64, 'q8_0')
    // Q8_0: |error| ≤ d/2 with d = amax/127 per block of 32
    for (let i = 0; i < 64; i++) expect(Math.abs(q[i] - x[i])).toBeLessThanOrEqual(32 / 7 / 127 / 2 + 1e-3)
    expect(() => wireRoundtrip(x, 48, 'f16')).toThrow(CanaryArgumentError)
  })
  it('computes the Mann–Whitney AUROC', () => {
    expect(auroc([3, 4], [1, 2])).toBe(1)
    expect(auroc([1, 2], [3, 4])).toBe(0)
    expect(auroc([1, 3], [2, 2])).toBe(0.5)
    expect(auroc([2], [2])).toBe(0.5)
  })
})
