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
  logDriftScore,
  parseDriftModel,
  positionBucket,
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

describe('diagonal bandwidth (benign drift is a band along relL2 = chord)', () => {
  // Benign drift spread over decades along the diagonal (noise of any size, no direction), a
  // few hundredths of a decade across it.
  const band = Array.from({ length: 600 }, () => {
    const rel = 10 ** (-4 + 0.5 * rnd.normal())
    const chord = rel * 10 ** (0.01 * rnd.normal())
    return { drift: { relL2: rel, cosine: (chord * chord) / 2, maxAbs: rel }, wire: 'f32' }
  })
  const m = fitDriftModel(band)
  const c = m.classes.f32
  const top = Math.max(...band.map((b) => b.drift.relL2))
  // an honest outlier: 4× the largest calibration noise, still on the diagonal (0.85 decades
  // from the nearest calibration point)
  const outlier = drift(10 ** 0.6 * top)
  // a scaled output: relL2 5× the largest benign one, direction almost kept (chord half the
  // largest benign one): 0.76 decades from the nearest calibration point, 0.71 across the band
  const chord = 10 ** -0.3 * top
  const scaled: Drift = { relL2: 10 ** 0.7 * top, cosine: (chord * chord) / 2, maxAbs: top }
  it('is chosen by cross-validation longer than the bandwidth across', () => {
    expect(c.diagonalBandwidth).toBeGreaterThan(2 * c.bandwidth)
    expect(parseDriftModel(serializeDriftModel(m)).classes.f32.diagonalBandwidth).toBe(c.diagonalBandwidth)
    const bad = JSON.parse(serializeDriftModel(m))
    bad.classes.f32.diagonalBandwidth = -1
    expect(() => parseDriftModel(bad)).toThrow(InvalidDriftModelError)
  })
  it('ranks a drift off the diagonal above a larger honest outlier along it', () => {
    expect(logDriftScore(m, scaled, 'f32')).toBeGreaterThan(logDriftScore(m, outlier, 'f32'))
    // With one isotropic bandwidth both are far from every calibration point and the outlier,
    // the farther one, ranks first: the miss the diagonal bandwidth removes.
    const { diagonalBandwidth: _, ...iso } = c
    const isotropic = { ...m, classes: { ...m.classes, f32: iso } }
    expect(logDriftScore(isotropic, scaled, 'f32')).toBeLessThan(logDriftScore(isotropic, outlier, 'f32'))
  })
})

describe('logDriftScore (the per-canary score before the ε cap)', () => {
  it('agrees with the capped ratio in the benign bulk and keeps ordering far-off drifts the cap ties', () => {
    for (const rel of [8e-5, 1e-4, 2e-4]) {
      const capped = Math.log(densityRatio(model, drift(rel), 'f16'))
      expect(logDriftScore(model, drift(rel), 'f16')).toBeCloseTo(capped, 2)
    }
    // both at the cap 1/ε for the sequential test...
    expect(densityRatio(model, drift(1e-2), 'f16')).toBeCloseTo(densityRatio(model, drift(1e-1), 'f16'), 6)
    // ...but the score still says which is farther from benign drift
    const near = logDriftScore(model, drift(1e-2), 'f16')
    const far = logDriftScore(model, drift(1e-1), 'f16')
    expect(near).toBeGreaterThan(-Math.log(model.contamination))
    expect(far).toBeGreaterThan(near)
    expect(Number.isFinite(far)).toBe(true)
    expect(logDriftScore(model, { relL2: 0, cosine: 0, maxAbs: 0 }, 'f16')).toBe(Number.NEGATIVE_INFINITY)
    expect(logDriftScore(model, drift(1e-7), 'f16')).toBe(Number.NEGATIVE_INFINITY)
    expect(() => logDriftScore(model, { relL2: -1, cosine: 0, maxAbs: 0 })).toThrow(CanaryArgumentError)
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
    // per wire, and per wire with quantised weights (/qw) and a q8_0 KV cache (/kv-q8_0): benignClassKey
    const wires = ['f16', 'f32', 'q8_0']
    const keys = wires.flatMap((w) => [w, `${w}/kv-q8_0`, `${w}/qw`, `${w}/qw/kv-q8_0`])
    expect(Object.keys(d.classes).sort()).toEqual(['*', ...keys].sort())
  })
})

describe('position-aware benign model (drift scored at its own KV length)', () => {
  // Benign drift widens with position: log10 relL2 ~ N(-4, 0.15²) early, N(-3.4, 0.15²) late.
  const r = createRandom(21)
  const at = (kvLength: number, center: number) => ({ drift: drift(10 ** (center + 0.15 * r.normal())), wire: 'f16', kvLength })
  const early = Array.from({ length: 800 }, (_, i) => at(16 + (i % 16), -4))
  const late = Array.from({ length: 800 }, (_, i) => at(128 + (i % 128), -3.4))
  const aware = fitDriftModel([...early, ...late])
  const blind = fitDriftModel([...early, ...late].map(({ drift, wire }) => ({ drift, wire })))
  it('buckets a step by its last position: a 2^k-position canary fills buckets 0 .. k−1 whole', () => {
    // kvLength = first position + rows, so the last row sits at kvLength − 1
    expect([1, 2, 3, 4, 5, 128, 129, 255, 256, 257].map(positionBucket)).toEqual([0, 0, 1, 1, 2, 6, 7, 7, 7, 8])
  })
  it('fits a log shift per position bucket that grows with position', () => {
    const sh = aware.classes.f16.positionShift!
    expect(sh).toHaveLength(8)
    expect(sh[7] - sh[4]).toBeGreaterThan(0.45)
    expect(sh[7] - sh[4]).toBeLessThan(0.75)
    expect(blind.classes.f16.positionShift).toBeUndefined()
  })
  it('convicts early drift that is benign only late, and spares late benign drift', () => {
    const suspicious = drift(10 ** -3.2) // 5 σ above the early benign drift, 1.3 σ above the late one
    expect(densityRatio(aware, suspicious, 'f16', 20)).toBeGreaterThan(1000)
    expect(densityRatio(aware, suspicious, 'f16', 200)).toBeLessThan(1)
    // the position-blind model sees the pooled (late) spread and cannot tell early tampering
    expect(densityRatio(blind, suspicious, 'f16')).toBeLessThan(1)
    // unknown position: the most lenient bucket; beyond the calibrated lengths: the last one
    expect(densityRatio(aware, suspicious, 'f16')).toBeLessThan(1)
    expect(densityRatio(aware, suspicious, 'f16', 4000)).toBeCloseTo(densityRatio(aware, suspicious, 'f16', 200), 6)
    const det = createDetector({ benign: aware })
    expect(det.observe('early', suspicious, 'f16', 20).excluded).toBe(false)
    expect(det.observe('early', suspicious, 'f16', 24).excluded).toBe(true)
    for (const s of late.slice(0, 400)) det.observe('late-honest', s.drift, 'f16', s.kvLength)
    expect(det.verdict('late-honest').excluded).toBe(false)
  })
  it('round-trips the shifts, loads models without them, and rejects bad positions', () => {
    const back = parseDriftModel(serializeDriftModel(aware))
    expect(back.classes.f16.positionShift).toEqual(aware.classes.f16.positionShift)
    expect(densityRatio(back, drift(2e-4), 'f16', 20)).toBeCloseTo(densityRatio(aware, drift(2e-4), 'f16', 20), 2)
    expect(densityRatio(model, drift(2e-4), 'f16', 20)).toBe(densityRatio(model, drift(2e-4), 'f16'))
    const bad = JSON.parse(serializeDriftModel(aware))
    bad.classes.f16.positionShift = ['x']
    expect(() => parseDriftModel(bad)).toThrow(InvalidDriftModelError)
    expect(() => densityRatio(aware, drift(1e-4), 'f16', -1)).toThrow(CanaryArgumentError)
    expect(() => fitDriftModel(early.map((s) => ({ ...s, kvLength: 0.5 })))).toThrow(CanaryArgumentError)
  })
})
