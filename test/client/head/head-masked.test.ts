import { describe, expect, it } from 'vitest'
import { headAsk, logprobAsk, pickMasked, rowLogprobs } from '../../../client/head/index.js'
import {
  createSampler,
  decodeHeadRows,
  encodeHeadRows,
  type HeadRow,
  headTopK,
  InvalidArgumentError,
  logprobStats,
  type SamplerOptions,
  Xorshift64
} from '../../../shards/index.js'

// Issue #35, session 4: grammars and logprobs with the head on a peer. A grammar's mask applied
// to the reply's top-k gives the local head's greedy token exactly (the full row when no allowed
// token came back), sampling keeps the masked distribution (chi-square against the exact masked
// softmax; a control that treats the reply's allowed tokens as all of them fails), and logprobs
// from a reply with its log-sum-exp equal the local head's (shards/constrain/logprobs.ts) exactly.

const VOCAB = 400
const DRAWS = 40_000

function logitsOf(seed: number): Float32Array {
  const rng = new Xorshift64(seed)
  return Float32Array.from({ length: VOCAB }, (_, i) => (rng.nextF32() * 2 - 1) * 3 + (i % 37 === 0 ? 4 : 0))
}

/** A grammar's mask: −∞ where refused; `refuseTop` refuses the likeliest n tokens too. */
function maskOf(logits: Float32Array, seed: number, refuseTop = 0): Float32Array {
  const rng = new Xorshift64(seed)
  const mask = Float32Array.from({ length: VOCAB }, () => (rng.nextF32() < 0.4 ? 0 : Number.NEGATIVE_INFINITY))
  const order = [...logits.keys()].sort((a, b) => logits[b] - logits[a] || a - b)
  for (const id of order.slice(0, refuseTop)) mask[id] = Number.NEGATIVE_INFINITY
  return mask
}

function masked(logits: Float32Array, mask: Float32Array): Float32Array {
  return logits.map((v, i) => (mask[i] === Number.NEGATIVE_INFINITY ? mask[i] : v))
}

function reply(logits: Float32Array, o: SamplerOptions, full: boolean, topLogprobs?: number): HeadRow {
  const ask = logprobAsk(headAsk(o, VOCAB, full), topLogprobs, VOCAB)
  const bytes = encodeHeadRows([headTopK(logits, ask)], ask.valuesF32, ask.logSumExp)
  return decodeHeadRows(bytes, 1, VOCAB, ask.valuesF32, ask.logSumExp)[0]
}

/** shards/sampler.ts's distribution over masked logits (the test file head-sampler.test.ts's `exact`). */
function exact(logits: Float32Array, o: SamplerOptions): Float64Array {
  const t = o.temperature ?? 1
  const order = [...logits.keys()].sort((a, b) => logits[b] - logits[a] || a - b)
  const topK = o.topK ?? 0
  const cut = topK > 0 ? order.slice(0, topK) : order
  const probs = cut.map((i) => Math.exp((logits[i] - logits[order[0]]) / t))
  const total = probs.reduce((a, b) => a + b, 0)
  let keep = probs.length
  if ((o.topP ?? 1) < 1) {
    let cum = 0
    for (let i = 0; i < probs.length; i++) {
      cum += probs[i] / total
      if (cum >= (o.topP as number)) {
        keep = i + 1
        break
      }
    }
  }
  const mass = probs.slice(0, keep).reduce((a, b) => a + b, 0)
  const p = new Float64Array(logits.length)
  for (let i = 0; i < keep; i++) p[cut[i]] = probs[i] / mass
  return p
}

function chiSquare(counts: Float64Array, p: Float64Array): { stat: number; critical: number } {
  let stat = 0
  let bins = 0
  let pooledObs = 0
  let pooledExp = 0
  for (let i = 0; i < p.length; i++) {
    const e = p[i] * DRAWS
    if (e >= 5) {
      stat += (counts[i] - e) ** 2 / e
      bins++
    } else {
      pooledObs += counts[i]
      pooledExp += e
    }
  }
  if (pooledExp >= 5) {
    stat += (pooledObs - pooledExp) ** 2 / pooledExp
    bins++
  } else if (pooledObs > 0 && pooledExp === 0) stat = Number.POSITIVE_INFINITY
  const df = Math.max(1, bins - 1)
  const z = 3.72 // one-sided p ≈ 1e-4 (Wilson–Hilferty)
  return { stat, critical: df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3 }
}

describe('grammar masks on a head reply', () => {
  it('greedy: the first allowed token of the reply, else the full row, is the masked argmax (300 rows)', () => {
    let fallbacks = 0
    for (let seed = 1; seed <= 300; seed++) {
      const logits = logitsOf(seed)
      if (seed % 3 === 0) logits[(seed * 7) % VOCAB] = logits[(seed * 11) % VOCAB] // ties
      const mask = maskOf(logits, seed + 1000, seed % 4 === 0 ? 40 : 0)
      let token = pickMasked(reply(logits, { temperature: 0 }, false), { temperature: 0 }, 0, mask)
      if (token === undefined) {
        fallbacks++
        token = pickMasked(reply(logits, { temperature: 0 }, true), { temperature: 0 }, 0, mask)
      }
      expect(token).toBe(createSampler({ temperature: 0 }).sample(masked(logits, mask)))
    }
    // a mask that refuses the likeliest 40 leaves no allowed token in a greedy reply (k ≤ 32)
    expect(fallbacks).toBeGreaterThanOrEqual(75)
  })

  // [name, options, reply size]: top-p needs the kept mass inside the reply, so a longer one
  const cases: [string, SamplerOptions, number][] = [
    ['temperature 1', { temperature: 1 }, 48],
    ['temperature 0.7, top-p 0.9', { temperature: 0.7, topP: 0.9 }, 200],
    ['temperature 1.3, top-k 12', { temperature: 1.3, topK: 12 }, 48]
  ]
  /** A truncated reply of k (f16 gaps, the tail exact), so the masked bounds decide most draws. */
  function truncated(logits: Float32Array, o: SamplerOptions, k = 48): HeadRow {
    const ask = { ...headAsk(o, VOCAB, false), minK: k, maxK: k, mass: 0 }
    return decodeHeadRows(encodeHeadRows([headTopK(logits, ask)], false), 1, VOCAB, false)[0]
  }
  function drawMasked(logits: Float32Array, mask: Float32Array, o: SamplerOptions, first: HeadRow) {
    const full = reply(logits, o, true)
    const rng = new Xorshift64(99)
    const counts = new Float64Array(VOCAB)
    let fallbacks = 0
    for (let d = 0; d < DRAWS; d++) {
      const u = rng.nextF32()
      let token = pickMasked(first, o, u, mask)
      if (token === undefined) {
        fallbacks++
        token = pickMasked(full, o, u, mask) as number
      }
      counts[token]++
    }
    return { counts, fallbacks }
  }
  for (const [name, o, k] of cases) {
    it(`sampling, ${name}: the masked distribution (chi-square, ${DRAWS} draws, 2 rows)`, () => {
      for (const seed of [1, 2]) {
        const logits = logitsOf(seed)
        const mask = maskOf(logits, seed + 50)
        const { counts, fallbacks } = drawMasked(logits, mask, o, truncated(logits, o, k))
        // the reply alone decided some draws (top-k 12 all: 12 allowed tokens came back; these
        // flat rows hold much mass outside 48 tokens), the rest went to the full row
        expect(fallbacks).toBeLessThan(DRAWS * 0.95)
        if (!o.topK) expect(fallbacks).toBeGreaterThan(0)
        const { stat, critical } = chiSquare(counts, exact(masked(logits, mask), o))
        expect(stat, `row ${seed}: ${stat} vs ${critical}`).toBeLessThan(critical)
      }
    })
  }

  it('control: taking the reply’s allowed tokens as all of them fails the same test', () => {
    const logits = logitsOf(1)
    const mask = maskOf(logits, 51)
    const o = { temperature: 1.5 }
    const first = truncated(logits, o)
    // every allowed token outside the reply counted as refused: the sampler never needs the rest
    const closed = Float32Array.from(mask, (v, id) => (first.ids.includes(id) ? v : Number.NEGATIVE_INFINITY))
    const { counts, fallbacks } = drawMasked(logits, closed, o, first)
    expect(fallbacks).toBe(0)
    const { stat, critical } = chiSquare(counts, exact(masked(logits, mask), o))
    expect(stat).toBeGreaterThan(critical)
  })
})

describe('logprobs from a head reply', () => {
  it('equal the local head’s log-softmax exactly, for greedy and sampled asks', () => {
    for (const [seed, o] of [
      [1, { temperature: 0 }],
      [2, { temperature: 0.7, topP: 0.9 }],
      [3, { temperature: 1.3 }]
    ] as [number, SamplerOptions][]) {
      const logits = logitsOf(seed)
      const row = reply(logits, o, false, 5)
      expect(row.ids.length).toBeGreaterThanOrEqual(5)
      const local = logprobStats(logits, 5)
      for (const token of [row.ids[0], row.ids[3]]) {
        const lp = rowLogprobs(row, token, 5)
        expect(lp.logprob).toBe(logits[token] - local.lse)
        expect(lp.top).toEqual(local.top)
      }
    }
  })

  it('a reply without the log-sum-exp, or a token outside it, is refused with a typed error', () => {
    const logits = logitsOf(4)
    const row = reply(logits, { temperature: 0 }, false)
    expect(() => rowLogprobs(row, row.ids[0], 3)).toThrow(InvalidArgumentError)
    const withLse = reply(logits, { temperature: 0 }, false, 3)
    const outside = [...logits.keys()].find((id) => !withLse.ids.includes(id)) as number
    expect(() => rowLogprobs(withLse, outside, 3)).toThrow(InvalidArgumentError)
    // a log-sum-exp below the top logit cannot be a row's: refused when decoding
    const ask = logprobAsk(headAsk({ temperature: 0 }, VOCAB, false), 3, VOCAB)
    const bad = encodeHeadRows([{ ...headTopK(logits, ask), lse: -1e9 }], true, true)
    expect(() => decodeHeadRows(bad, 1, VOCAB, true, true)).toThrow(InvalidArgumentError)
  })
})
