import { describe, expect, it } from 'vitest'
import {
  CanaryArgumentError,
  createDetector,
  createRandom,
  type Drift,
  defaultBenignModel,
  densityRatio,
  fitDriftModel,
  InvalidDriftModelError,
  parseDriftModel,
  serializeDriftModel
} from '../../canary/index.js'

// Synthetic benign drifts: log10 relL2 ~ N(-4, 0.2²), cosine consistent with isotropic noise.
const rnd = createRandom(9)
const drift = (rel: number): Drift => ({ relL2: rel, cosine: (rel * rel) / 2, maxAbs: rel })
const benignDrift = (): Drift => drift(10 ** (-4 + 0.2 * rnd.normal()))
const samples = Array.from({ length: 600 }, () => ({ drift: benignDrift(), wire: 'f16' }))
const model = fitDriftModel(samples)

describe('fitDriftModel', () => {
  it('separates benign drift from tampering drift and floors exact zeros', () => {
    expect(densityRatio(model, drift(1e-4), 'f16')).toBeLessThan(0.01)
    expect(densityRatio(model, drift(1e-1), 'f16')).toBeCloseTo(1 / model.contamination, 3)
    // A scaled output (relL2 large, cosine 0) is off the benign diagonal.
    expect(densityRatio(model, { relL2: 1e-2, cosine: 0, maxAbs: 1 }, 'f16')).toBeGreaterThan(100)
    expect(densityRatio(model, { relL2: 0, cosine: 0, maxAbs: 0 }, 'f16')).toBe(0)
    expect(densityRatio(model, drift(1e-7), 'f16')).toBe(0) // closer than the benign bulk
  })
  it('round-trips through JSON and rejects malformed models', () => {
    const back = parseDriftModel(serializeDriftModel(model))
    expect(densityRatio(back, drift(2e-4), 'f16')).toBeCloseTo(densityRatio(model, drift(2e-4), 'f16'), 2)
    expect(() => parseDriftModel('{"version":2}')).toThrow(InvalidDriftModelError)
    expect(() => parseDriftModel('nope')).toThrow(InvalidDriftModelError)
    expect(() => fitDriftModel([])).toThrow(CanaryArgumentError)
  })
})

describe('createDetector (Wald SPRT with a GLR over tamper rates)', () => {
  it('excludes a full-rate tamperer after 2 canaries: log Λ = 2·log(1/ε) = 16 ≥ 2·log 99', () => {
    const det = createDetector({ benign: model })
    expect(det.observe('bad', drift(0.1), 'f16').excluded).toBe(false)
    const v = det.observe('bad', drift(0.1), 'f16')
    expect(v.excluded).toBe(true)
    expect(v.excludedAfter).toBe(2)
    expect(v.rate).toBe(1)
    expect(v.logLikelihoodRatio).toBeCloseTo(16, 6)
    expect(det.excluded()).toEqual(['bad'])
  })
  it('catches a 10 %-rate tamperer and never a benign peer', () => {
    const det = createDetector({ benign: model })
    const r = createRandom(5)
    let caughtAt = 0
    for (let i = 1; i <= 400 && caughtAt === 0; i++) {
      const v = det.observe('sly', r.next() < 0.1 ? drift(0.05) : benignDrift(), 'f16')
      if (v.excluded) caughtAt = i
    }
    expect(caughtAt).toBeGreaterThan(0)
    expect(caughtAt).toBeLessThan(100)
    for (let p = 0; p < 20; p++) for (let i = 0; i < 500; i++) det.observe(`honest-${p}`, benignDrift(), 'f16')
    expect(det.excluded()).toEqual(['sly'])
    expect(
      Math.max(
        ...det
          .report()
          .filter((v) => v.peerId !== 'sly')
          .map((v) => v.posterior)
      )
    ).toBeLessThan(0.01)
    expect(det.posterior('unknown')).toBe(0.01)
  })
  it('validates options and ships a default model', () => {
    expect(() => createDetector({ benign: model, prior: 0 })).toThrow(CanaryArgumentError)
    expect(() => createDetector({ benign: model, bound: 0.001 })).toThrow(CanaryArgumentError)
    expect(() => createDetector({ benign: model, rates: [1.5] })).toThrow(CanaryArgumentError)
    const d = defaultBenignModel()
    expect(Object.keys(d.classes).sort()).toEqual(['*', 'f16', 'f32', 'int8'])
  })
})
