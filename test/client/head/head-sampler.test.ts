import { describe, expect, it } from 'vitest'
import { headAsk, pickFromRow } from '../../../client/head/index.js'
import { decodeHeadRows, encodeHeadRows, type HeadRow, headTopK, type SamplerOptions, Xorshift64 } from '../../../shards/index.js'

// Issue #35: sampling through the head on a peer keeps the model's distribution. Over many
// seeded draws, the tokens picked from the (f16-quantised) top-k reply, with the full-row
// fallback when a draw lands outside it, follow the exact softmax of the full row under the
// same temperature / top-k / top-p rules as shards/sampler.ts (a chi-square test at p ≈ 1e-4).
// A control that ignores the tail mass fails the same test, so the test can fail.

const VOCAB = 400
const DRAWS = 40_000

function logitsOf(seed: number): Float32Array {
  const rng = new Xorshift64(seed)
  // a peaked head and a long tail, as a language model's
  return Float32Array.from({ length: VOCAB }, (_, i) => (rng.nextF32() * 2 - 1) * 3 + (i % 37 === 0 ? 4 : 0))
}

/** The exact distribution shards/sampler.ts samples from. */
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

function reply(logits: Float32Array, o: SamplerOptions, full: boolean): HeadRow {
  const ask = headAsk(o, VOCAB, full)
  const [row] = decodeHeadRows(encodeHeadRows([headTopK(logits, ask)], ask.valuesF32), 1, VOCAB, ask.valuesF32)
  return row
}

/** Counts of DRAWS tokens picked through the head protocol; `ignoreTail`: the control. */
function draw(logits: Float32Array, o: SamplerOptions, ignoreTail = false): { counts: Float64Array; fallbacks: number } {
  const counts = new Float64Array(VOCAB)
  // the control: a fixed top-32 renormalised, as a thin client that ignored the rest would sample
  const first = ignoreTail ? headTopK(logits, { minK: 32, maxK: 32, mass: 0, temperature: 1 }) : reply(logits, o, false)
  const fullRow = reply(logits, o, true)
  const rng = new Xorshift64(12345)
  let fallbacks = 0
  for (let d = 0; d < DRAWS; d++) {
    const u = rng.nextF32()
    let token = pickFromRow(ignoreTail ? { ...first, tail: 0 } : first, o, u, VOCAB)
    if (token === undefined) {
      fallbacks++
      token = pickFromRow(fullRow, o, u, VOCAB) as number
    }
    counts[token]++
  }
  return { counts, fallbacks }
}

/** Chi-square statistic over bins with expected count ≥ 5 (the rest pooled), and its critical value. */
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
  const critical = df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3
  return { stat, critical }
}

describe('sampling through the head on a peer keeps the distribution', () => {
  const cases: [string, SamplerOptions][] = [
    ['temperature 1', { temperature: 1 }],
    ['temperature 0.7, top-p 0.9', { temperature: 0.7, topP: 0.9 }],
    ['temperature 1.3, top-k 12', { temperature: 1.3, topK: 12 }],
    ['temperature 0.8, top-k 40, top-p 0.8', { temperature: 0.8, topK: 40, topP: 0.8 }]
  ]
  for (const [name, o] of cases) {
    it(`${name}: chi-square over ${DRAWS} draws on 3 rows`, () => {
      for (const seed of [1, 2, 3]) {
        const logits = logitsOf(seed)
        const { counts } = draw(logits, o)
        const { stat, critical } = chiSquare(counts, exact(logits, o))
        expect(stat, `row ${seed}: ${stat} vs ${critical}`).toBeLessThan(critical)
      }
    })
  }

  it('falls back to the full row about as often as the mass outside the reply', () => {
    const logits = logitsOf(4)
    const { fallbacks } = draw(logits, { temperature: 1 })
    const r = reply(logits, { temperature: 1 }, false)
    let inside = 0
    for (const v of r.values) inside += Math.exp(v - r.values[0])
    const outside = r.tail / (inside + r.tail)
    expect(outside).toBeLessThanOrEqual(0.0011)
    expect(fallbacks / DRAWS).toBeLessThan(outside + 0.003)
  })

  it('greedy is the reply top token: the argmax with ties to the lower id', () => {
    const logits = logitsOf(5)
    logits[7] = 20
    logits[3] = 20
    expect(pickFromRow(reply(logits, { temperature: 0 }, false), { temperature: 0 }, 0.5, VOCAB)).toBe(3)
  })

  it('control: a sampler that drops the tail mass (a top-k renormalised) fails the same test', () => {
    const logits = logitsOf(1)
    const o = { temperature: 1.5 }
    const { counts } = draw(logits, o, true)
    const { stat, critical } = chiSquare(counts, exact(logits, o))
    expect(stat).toBeGreaterThan(critical)
  })
})
