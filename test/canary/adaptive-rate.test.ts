import { describe, expect, it } from 'vitest'
import {
  CanaryArgumentError,
  createAdaptiveRate,
  createDetector,
  createRandom,
  defaultBenignModel,
  expectedStepsToExclusion,
  fixedRate,
  startCanariesFor
} from '../../canary/index.js'

describe('adaptive canary rate', () => {
  it('checks a new peer on every step for a burst sized from the detection bound, then at the base rate', () => {
    const r = createAdaptiveRate({ inFlight: 4 })
    const at = (observations: number) => r.rateFor({ observations, posterior: 0.01, excluded: false })
    // the smallest burst whose expected steps to exclude a 10 % tamperer are within 40, with 4
    // decoys in flight (4 canaries a real step during the burst)
    expect(r.inFlight).toBe(4)
    expect(r.startCanaries).toBe(24)
    expect(expectedStepsToExclusion(24, 0.1, 0.03, 4)).toBeLessThanOrEqual(40)
    expect(expectedStepsToExclusion(23, 0.1, 0.03, 4)).toBeGreaterThan(40)
    expect(startCanariesFor(40, 0.1, 0.03, 4)).toBe(24)
    // one at a time (the burst before decoys in flight): 16 canaries for 80 steps
    expect(startCanariesFor(80, 0.1, 0.03)).toBe(16)
    expect(createAdaptiveRate().inFlight).toBe(4) // the default (canary/options.ts)
    expect(createAdaptiveRate({ inFlight: 1, targetSteps: 80 }).startCanaries).toBe(16)
    for (let n = 0; n < 24; n++) expect(at(n)).toBe(1)
    for (let n = 24; n < 200; n++) expect(at(n)).toBe(0.03)
    // a longer detection budget needs a shorter burst; an explicit length wins
    expect(createAdaptiveRate({ targetSteps: 150 }).startCanaries).toBeLessThan(24)
    expect(createAdaptiveRate({ startCanaries: 4 }).rateFor({ observations: 4, posterior: 0, excluded: false })).toBe(0.03)
    expect(r.rateFor({ observations: 20, posterior: 0.5, excluded: false })).toBe(1) // a suspect
    expect(r.rateFor({ observations: 5, posterior: 1, excluded: true })).toBe(0)
    expect(fixedRate(0.03).rateFor({ observations: 0, posterior: 0.5, excluded: false })).toBe(0.03)
  })

  it('keeps several decoys in flight below the evidence threshold, one after it, none once excluded', () => {
    const r = createAdaptiveRate({ inFlight: 4 })
    const lanes = (observations: number, posterior = 0.01, excluded = false) => r.lanes({ observations, posterior, excluded })
    expect(lanes(0)).toBe(4)
    expect(lanes(20)).toBe(4)
    expect(lanes(22)).toBe(2) // no more in flight than the burst still needs
    expect(lanes(23)).toBe(1)
    expect(lanes(24)).toBe(1)
    expect(lanes(500)).toBe(1)
    expect(lanes(500, 0.5)).toBe(4) // a suspect
    expect(lanes(3, 1, true)).toBe(0)
    expect(createAdaptiveRate({ inFlight: 1 }).lanes({ observations: 0, posterior: 0, excluded: false })).toBe(1)
    expect(fixedRate(0.03).lanes({ observations: 0, posterior: 0.5, excluded: false })).toBe(1)
    expect(() => createAdaptiveRate({ inFlight: 0 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ inFlight: 1.5 })).toThrow(CanaryArgumentError)
  })

  it('E(N) matches a simulation of the burst (two tampered canaries convict, the second at rate 1)', () => {
    const rnd = createRandom(3)
    const r = createAdaptiveRate({ startCanaries: 12 })
    let total = 0
    const trials = 4000
    for (let k = 0; k < trials; k++) {
      let obs = 0
      let hits = 0
      let t = 0
      while (hits < 2) {
        t++
        if (rnd.next() >= (hits > 0 ? 1 : r.rateFor({ observations: obs, posterior: 0, excluded: false }))) continue
        obs++
        if (rnd.next() < 0.1) hits++
      }
      total += t
    }
    const expected = expectedStepsToExclusion(12, 0.1, 0.03)
    expect(Math.abs(total / trials - expected) / expected).toBeLessThan(0.1)
  })

  it('rejects bad options with a typed error', () => {
    expect(() => createAdaptiveRate({ base: 0 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ base: 0.2, start: 0.1 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ startCanaries: -1 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ targetSteps: 0 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ designTamperRate: 1 })).toThrow(CanaryArgumentError)
    // a target no burst can reach: 1/(q·start·inFlight) + 1/q even when no tamperer passes it clean
    expect(() => createAdaptiveRate({ targetSteps: 12 })).toThrow(CanaryArgumentError)
    expect(() => createAdaptiveRate({ targetSteps: 15, inFlight: 1 })).toThrow(CanaryArgumentError)
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
