import { describe, expect, it } from 'vitest'
import { driftMetrics } from '../../canary/index.js'
import { createTamper, InvalidTamperOptionsError, roundMantissa } from '../../node/daemon/tamper.js'

const output = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i * 0.37) * 2 + 3)
const input = Float32Array.from({ length: 256 }, (_, i) => Math.cos(i * 0.11))
const ctx = (stepId: number, sessionId = 's') => ({ sessionId, stepId, input, output })

describe('createTamper', () => {
  it('applies each mode with its known effect', () => {
    const scale = createTamper({ mode: 'scale', size: 0.1, rate: 1, seed: 1 }).apply(ctx(0))
    expect(driftMetrics(scale, output).relL2).toBeCloseTo(0.1, 6)
    expect(driftMetrics(scale, output).cosine).toBeLessThan(1e-12)
    const noise = createTamper({ mode: 'noise', size: 0.05, rate: 1, seed: 1 }).apply(ctx(0))
    expect(driftMetrics(noise, output).relL2).toBeGreaterThan(0.04)
    expect(driftMetrics(noise, output).relL2).toBeLessThan(0.06)
    const zero = createTamper({ mode: 'zero', size: 0.25, rate: 1, seed: 1 }).apply(ctx(0))
    expect(zero.filter((v) => v === 0).length).toBe(64)
    expect(createTamper({ mode: 'skip', size: 1, rate: 1, seed: 1 }).apply(ctx(0))).toEqual(input)
    const bias = createTamper({ mode: 'bias', size: 0.5, rate: 1, seed: 1 }).apply(ctx(0))
    const rms = Math.sqrt(output.reduce((s, v) => s + v * v, 0) / output.length)
    expect(bias[7] - output[7]).toBeCloseTo(0.5 * rms, 5)
    const low = createTamper({ mode: 'lowprec', size: 3, rate: 1, seed: 1 }).apply(ctx(0))
    expect(driftMetrics(low, output).relL2).toBeGreaterThan(0.01)
  })
  it('rounds mantissas to nearest even (known answers)', () => {
    // 1.0625 = 1.0001b: 3 bits → tie between 1.000b and 1.001b → even → 1.0; 1.1875 = 1.0011b → 1.25
    expect([...roundMantissa(Float32Array.from([1.0625, 1.1875, -3.3, 0]), 3)]).toEqual([1, 1.25, -3.25, 0])
    expect([...roundMantissa(Float32Array.from([Math.PI]), 23)]).toEqual([Math.fround(Math.PI)])
  })
  it('replays an earlier output of another step, never the current one', () => {
    const t = createTamper({ mode: 'replay', size: 1, rate: 1, seed: 1 })
    expect(t.apply(ctx(0))).toBe(output) // nothing to replay yet
    const other = Float32Array.from(output, (v) => v + 1)
    expect(t.apply({ sessionId: 's', stepId: 1, input, output: other })).toEqual(output)
    expect(t.apply({ sessionId: 't', stepId: 0, input, output: new Float32Array(8) })).toEqual(new Float32Array(8))
  })
  it('tampers a seeded fraction of steps, the same way on a retry', () => {
    const t = createTamper({ mode: 'noise', size: 0.1, rate: 0.1, seed: 42 })
    let n = 0
    for (let i = 0; i < 5000; i++) if (t.tampers('session', i)) n++
    expect(n).toBeGreaterThan(400)
    expect(n).toBeLessThan(600)
    const a = t.apply(ctx(3))
    expect(t.apply(ctx(3))).toEqual(a)
    const u = createTamper({ mode: 'noise', size: 0.1, rate: 0.1, seed: 42 })
    expect(u.tampers('session', 17)).toBe(t.tampers('session', 17))
  })
  it('with after P, tampers only rows at positions ≥ P', () => {
    const t = createTamper({ mode: 'bias', size: 0.5, rate: 1, seed: 1, after: 64 })
    // output as 4 rows of 64 values
    expect(t.apply({ ...ctx(0), startPosition: 0, rows: 4 })).toBe(output) // positions 0..3
    expect(t.apply({ ...ctx(1), startPosition: 60, rows: 4 })).toBe(output) // 60..63
    const mixed = t.apply({ ...ctx(2), startPosition: 62, rows: 4 }) // 62, 63 honest; 64, 65 not
    expect([...mixed.subarray(0, 128)]).toEqual([...output.subarray(0, 128)])
    expect(driftMetrics(mixed.subarray(128), output.subarray(128)).relL2).toBeGreaterThan(0.1)
    const late = t.apply({ ...ctx(3), startPosition: 64, rows: 4 })
    expect(late.every((v, i) => v !== output[i])).toBe(true)
    // without positions it cannot decide: a clear error, not a silent honest answer
    expect(() => t.apply(ctx(4))).toThrow(InvalidTamperOptionsError)
    expect(() => createTamper({ mode: 'bias', size: 0.5, rate: 1, seed: 1, after: -1 })).toThrow(InvalidTamperOptionsError)
  })
  it('rejects bad options', () => {
    expect(() => createTamper({ mode: 'zero', size: 2, rate: 1, seed: 1 })).toThrow(InvalidTamperOptionsError)
    expect(() => createTamper({ mode: 'lowprec', size: 2.5, rate: 1, seed: 1 })).toThrow(InvalidTamperOptionsError)
    expect(() => createTamper({ mode: 'noise', size: 0.1, rate: 0, seed: 1 })).toThrow(InvalidTamperOptionsError)
    expect(() => createTamper({ mode: 'melt' as 'noise', size: 0.1, rate: 1, seed: 1 })).toThrow(InvalidTamperOptionsError)
  })
})
