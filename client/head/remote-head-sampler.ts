/**
 * Sampling from a head reply (issue #35) with the rules of shards/sampler.ts: greedy is ids[0]
 * (the peer ranks ties as argmax does); top-k keeps the first topK returned; top-p and plain
 * temperature sampling measure mass against the returned tokens plus the reply's tail mass. One
 * uniform draw u per token: when u·(mass) falls inside the returned tokens the choice is exact,
 * else (undefined) the caller asks the step's full row in f32 and picks again with the same u, so
 * the distribution is the model's. Values in f16 gaps move each probability by at most
 * exp(2^-11·gap/T) − 1 relative (docs/verification.md).
 */
import type { HeadRequest } from '../../protocol/index.js'
import type { HeadRow, SamplerOptions } from '../../shards/index.js'

/** Tokens a greedy step asks: enough to check and to see near-ties, few bytes. */
const GREEDY = { minK: 4, maxK: 32, mass: 0.9, temperature: 1 }
/** Sampling: the mass inside the reply; a draw lands outside with about this much left. */
const SAMPLED_MASS = 0.999
const SAMPLED_MAX_K = 1024

export type HeadAsk = Omit<HeadRequest, 'checkDtype'>

/** What a step asks of the head for these sampling settings (`full`: the whole row in f32). */
export function headAsk(o: SamplerOptions, vocab: number, full: boolean, allRows = false): HeadAsk {
  const temperature = o.temperature ?? 1
  if (full || (o.repetitionPenalty ?? 1) !== 1) {
    return { minK: vocab, maxK: vocab, mass: 0, temperature: temperature || 1, allRows, valuesF32: true }
  }
  if (temperature === 0) return { ...GREEDY, maxK: Math.min(vocab, GREEDY.maxK), allRows, valuesF32: false }
  const topK = o.topK ?? 0
  if (topK > 0 && topK <= SAMPLED_MAX_K) return { minK: topK, maxK: topK, mass: 0, temperature, allRows, valuesF32: false }
  const mass = (o.topP ?? 1) < 1 ? (o.topP as number) : SAMPLED_MASS
  return { minK: 4, maxK: Math.min(vocab, SAMPLED_MAX_K), mass, temperature, allRows, valuesF32: false }
}

/**
 * The token a uniform draw `u` picks from a reply row, or undefined when the mass it needs is not
 * inside the row (then ask the full row). Repetition penalties take the full-row path instead.
 */
export function pickFromRow(row: HeadRow, o: SamplerOptions, u: number, vocab: number): number | undefined {
  const temperature = o.temperature ?? 1
  if (temperature === 0) return row.ids[0]
  const k = row.ids.length
  const topK = o.topK ?? 0
  const topP = o.topP ?? 1
  const full = k >= vocab
  let n = k
  if (topK > 0 && topK < vocab) {
    if (k < topK && !full) return undefined
    n = Math.min(k, topK)
  }
  const probs = new Float64Array(n)
  let inside = 0
  for (let i = 0; i < n; i++) {
    probs[i] = Math.exp((row.values[i] - row.values[0]) / temperature)
    inside += probs[i]
  }
  // the softmax's denominator: the returned tokens, plus the rest unless top-k cut them
  const total = topK > 0 && topK < vocab ? inside : inside + row.tail
  let keep = n
  if (topP < 1) {
    let cum = 0
    keep = -1
    for (let i = 0; i < n; i++) {
      cum += probs[i] / total
      if (cum >= topP) {
        keep = i + 1
        break
      }
    }
    if (keep < 0) {
      if (!full && row.tail > 0) return undefined
      keep = n
    }
  }
  let mass = 0
  for (let i = 0; i < keep; i++) mass += probs[i]
  // no top-p or top-k cut: the draw is over everything, the rest included
  const whole = topP >= 1 && !(topK > 0 && topK < vocab) ? total : mass
  const r = u * whole
  let cdf = 0
  for (let i = 0; i < keep; i++) {
    cdf += probs[i]
    if (r < cdf) return row.ids[i]
  }
  return whole > mass && !full ? undefined : row.ids[keep - 1]
}

/** A full vocabulary row from a reply row: its values at its ids, −∞ elsewhere; ids[0] stays the argmax. */
export function rowLogits(row: HeadRow, vocab: number, out = new Float32Array(vocab)): Float32Array {
  out.fill(Number.NEGATIVE_INFINITY)
  const top = row.values[0]
  // f16 gaps may round a near-tie onto the top: keep the peer's (exact) order's winner first
  const below = nextDown32(top)
  for (let i = row.ids.length - 1; i >= 1; i--) out[row.ids[i]] = Math.min(row.values[i], below)
  out[row.ids[0]] = top
  return out
}

/** The largest float32 below x (finite x). */
function nextDown32(x: number): number {
  const f = new Float32Array([x])
  const bits = new Int32Array(f.buffer)
  if (x === 0) return -(2 ** -149)
  bits[0] += x > 0 ? -1 : 1
  return f[0]
}
