import { describe, expect, it } from 'vitest'
import {
  CanaryArgumentError,
  createAdaptiveRate,
  createDetector,
  createRandom,
  defaultBenignModel,
  fixedRate
} from '../../canary/index.js'

describe('adaptive canary rate', () => {
  it('starts dense for a new peer, decays to the base rate as clean canaries accumulate', () => {
    const r = createAdaptiveRate()
    const at = (observations: number) => r.rateFor({ observations, posterior: 0.01, excluded: false })
    expect(at(0)).toBeCloseTo(0.75)
    expect(at(6)).toBeCloseTo(0.03 + 0.72 / 2)
    expect(at(12)).toBeCloseTo(0.03 + 0.72 / 4)
    for (let n = 1; n < 200; n++) expect(at(n)).toBeLessThanOrEqual(at(n - 1))
    expect(at(200)).toBeCloseTo(0.03, 6)
    expect(r.rateFor({ observations: 5, posterior: 0.5, excluded: false })).toBe(1) // a suspect
    expect(r.rateFor({ observations: 5, posterior: 1, excluded: true })).toBe(0)
    expect(fixedRate(0.03).rateFor({ observations: 0, posterior: 0.5, excluded: false })).toBe(0.03)
  })

  it('rejects bad options with a typed error', () => {
    expect(() => createAdaptiveRate({ base: 0 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ base: 0.2, start: 0.1 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ halfLife: -1 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ suspectPosterior: 1 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate().rateFor({ observations: -1, posterior: 0, excluded: false })).toThrow(CanaryArgumentError)
  })

  it('probes a suspect densely: a peer with a far-off drift on 10 % of steps is caught far sooner than at a fixed rate', () => {
    const benign = defaultBenignModel()
    const far = { relL2: 0.5, cosine: 0.1, maxAbs: 2 }
    const near = { relL2: 0, cosine: 0, maxAbs: 0 }
    const steps = (rate: ReturnType<typeof createAdaptiveRate>, seed: number): number => {
      const det = createDetector({ benign })
      const rnd = createRandom(seed)
      for (let t = 1; t < 100_000; t++) {
        if (rnd.next() >= rate.rateFor(det.verdict('p'))) continue
        if (det.observe('p', rnd.next() < 0.1 ? far : near, 'f32').excluded) return t
      }
      return Number.POSITIVE_INFINITY
    }
    const mean = (r: ReturnType<typeof createAdaptiveRate>) =>
      Array.from({ length: 200 }, (_, i) => steps(r, i + 1)).reduce((a, b) => a + b, 0) / 200
    const adaptive = mean(createAdaptiveRate())
    const fixed = mean(fixedRate(0.03))
    expect(adaptive).toBeLessThan(100)
    expect(fixed).toBeGreaterThan(4 * adaptive)
  })
})
