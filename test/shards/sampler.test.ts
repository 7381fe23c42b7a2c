import { describe, expect, it } from 'vitest'
import { createSampler, InvalidArgumentError, logSoftmax, Xorshift64 } from '../../shards/index.js'

const logits = Float32Array.from([1.0, 3.0, 2.5, -1.0, 0.5])

describe('sampler', () => {
  it("xorshift64* matches llama2.c's random_u32 (known answers, seed 42)", () => {
    const rng = new Xorshift64(42)
    expect([rng.nextU32(), rng.nextU32(), rng.nextU32(), rng.nextU32()]).toEqual([1456360119, 3359763283, 3393612768, 4054632243])
  })

  it('greedy picks the argmax; top-k 1 and a tiny top-p do too', () => {
    expect(createSampler({ temperature: 0 }).sample(logits)).toBe(1)
    const k1 = createSampler({ temperature: 1.5, topK: 1, seed: 3 })
    const p0 = createSampler({ temperature: 1.5, topP: 1e-6, seed: 3 })
    for (let i = 0; i < 50; i++) {
      expect(k1.sample(logits)).toBe(1)
      expect(p0.sample(logits)).toBe(1)
    }
  })

  it('is reproducible for a seed and differs across seeds', () => {
    const run = (seed: number) => {
      const s = createSampler({ temperature: 1, seed })
      return Array.from({ length: 40 }, () => s.sample(logits))
    }
    expect(run(7)).toEqual(run(7))
    expect(run(7)).not.toEqual(run(8))
  })

  it('samples with the softmax probabilities at the temperature', () => {
    const s = createSampler({ temperature: 1, seed: 11 })
    const counts = new Array(logits.length).fill(0)
    const n = 20000
    for (let i = 0; i < n; i++) counts[s.sample(logits)]++
    const p = Array.from(logSoftmax(logits), Math.exp)
    counts.forEach((c, i) => {
      expect(Math.abs(c / n - p[i])).toBeLessThan(0.015)
    })
  })

  it('top-k keeps only the k best; top-p only the nucleus', () => {
    const k2 = createSampler({ temperature: 5, topK: 2, seed: 1 })
    const p = createSampler({ temperature: 1, topP: 0.7, seed: 1 })
    const seenK = new Set<number>()
    const seenP = new Set<number>()
    for (let i = 0; i < 500; i++) {
      seenK.add(k2.sample(logits))
      seenP.add(p.sample(logits))
    }
    expect([...seenK].sort()).toEqual([1, 2])
    // probabilities 0.52, 0.31, ...: the smallest set reaching 0.7 is {1, 2}
    expect([...seenP].sort()).toEqual([1, 2])
  })

  it('repetition penalty acts on log-probabilities, so it ignores the logits zero point', () => {
    const l = Float32Array.from([2.0, 1.9, 0.1])
    const shifted = l.map((x) => x - 100)
    const s = createSampler({ temperature: 0, repetitionPenalty: 1.3 })
    expect(createSampler({ temperature: 0 }).sample(l, [0])).toBe(0)
    expect(s.sample(l, [0])).toBe(1)
    expect(s.sample(shifted, [0])).toBe(1)
    expect(
      s.sample(
        l.map((x) => x + 100),
        [0]
      )
    ).toBe(1)
    // outside the window the penalty does not apply
    const w = createSampler({ temperature: 0, repetitionPenalty: 1.3, repetitionWindow: 1 })
    expect(w.sample(l, [0, 2])).toBe(0)
  })

  it('samples a whole vocabulary as the index-order cdf, draw for draw (issue 31: the fast path)', () => {
    // the arithmetic the sampler had before its typed-array path: index order, float64, no cut
    const reference = (x: Float32Array, t: number, rng: Xorshift64): number => {
      const order = Array.from({ length: x.length }, (_, i) => i)
      let max = Number.NEGATIVE_INFINITY
      for (const i of order) if (x[i] > max) max = x[i]
      const probs = order.map((i) => Math.exp((x[i] - max) / t))
      let mass = 0
      for (const p of probs) mass += p
      const r = rng.nextF32() * mass
      let cdf = 0
      for (let i = 0; i < probs.length; i++) {
        cdf += probs[i]
        if (r < cdf) return order[i]
      }
      return order[order.length - 1]
    }
    const big = Float32Array.from({ length: 151_936 }, (_, i) => Math.sin(i * 0.37) * 6)
    big[5] = Number.NEGATIVE_INFINITY
    for (const t of [0.7, 1, 1.2]) {
      const s = createSampler({ temperature: t, seed: 11 })
      const rng = new Xorshift64(11)
      for (let k = 0; k < 20; k++) expect(s.sample(big)).toBe(reference(big, t, rng))
    }
  })

  it('validates its options', () => {
    expect(() => createSampler({ temperature: -1 })).toThrow(InvalidArgumentError)
    expect(() => createSampler({ topP: 0 })).toThrow(InvalidArgumentError)
    expect(() => createSampler({ topK: 1.5 })).toThrow(InvalidArgumentError)
    expect(() => createSampler({ repetitionPenalty: 0.5 })).toThrow(InvalidArgumentError)
    expect(() => createSampler().sample(new Float32Array(0))).toThrow(InvalidArgumentError)
  })
})
