import { describe, expect, it } from 'vitest'
import { decodeHeadRows, encodeHeadRows, headTopK, InvalidArgumentError } from '../../shards/index.js'

function row(values: number[]): Float32Array {
  return Float32Array.from(values)
}

describe('the head top-k (issue #35)', () => {
  it('ranks by value, ties by lower id first (argmax order), so ids[0] is the greedy token', () => {
    const r = headTopK(row([1, 5, 3, 5, 2]), { minK: 3, maxK: 3, mass: 0, temperature: 1 })
    expect([...r.ids]).toEqual([1, 3, 2])
    expect([...r.values]).toEqual([5, 5, 3])
  })

  it('adapts k to the mass asked at the temperature, and reports the rest as the tail', () => {
    const logits = row(Array.from({ length: 1000 }, (_, i) => -i / 10))
    const r = headTopK(logits, { minK: 1, maxK: 1000, mass: 0.9, temperature: 1 })
    let total = 0
    for (const x of logits) total += Math.exp(x - logits[0])
    let inside = 0
    for (const v of r.values) inside += Math.exp(v - r.values[0])
    expect(inside / total).toBeGreaterThanOrEqual(0.9)
    const shorter = inside - Math.exp(r.values[r.values.length - 1] - r.values[0])
    expect(shorter / total).toBeLessThan(0.9)
    expect(r.tail).toBeCloseTo(total - inside, 6)
    // a colder softmax needs fewer tokens for the same mass
    expect(headTopK(logits, { minK: 1, maxK: 1000, mass: 0.9, temperature: 0.5 }).ids.length).toBeLessThan(r.ids.length)
  })

  it('round-trips rows through the wire encoding (f16 gaps within 2^-11 of the gap; f32 exact)', () => {
    const logits = row(Array.from({ length: 300 }, (_, i) => Math.sin(i * 7.1) * 6))
    const r = headTopK(logits, { minK: 20, maxK: 20, mass: 0, temperature: 1 })
    const [f32] = decodeHeadRows(encodeHeadRows([r], true), 1, 300, true)
    expect(f32.values).toEqual(r.values)
    expect(f32.ids).toEqual(r.ids)
    const [f16] = decodeHeadRows(encodeHeadRows([r], false), 1, 300, false)
    expect(f16.ids).toEqual(r.ids)
    f16.values.forEach((v, i) => {
      expect(Math.abs(v - r.values[i])).toBeLessThanOrEqual(2 ** -11 * (r.values[0] - r.values[i]) + 1e-6)
    })
  })

  it('refuses replies that do not hold the rows they claim, or ids outside the vocabulary', () => {
    const r = headTopK(row([1, 2, 3]), { minK: 2, maxK: 2, mass: 0, temperature: 1 })
    const bytes = encodeHeadRows([r], false)
    expect(() => decodeHeadRows(bytes, 2, 3, false)).toThrow(InvalidArgumentError)
    expect(() => decodeHeadRows(bytes.subarray(0, bytes.length - 1), 1, 3, false)).toThrow(InvalidArgumentError)
    expect(() => decodeHeadRows(bytes, 1, 2, false)).toThrow(InvalidArgumentError)
  })
})
