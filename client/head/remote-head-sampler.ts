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
import { type HeadRow, InvalidArgumentError, type SamplerOptions, type TokenLogprobs } from '../../shards/index.js'

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

/**
 * A step's ask with logprobs (issue 37's `logprobs`/`top_logprobs` under `--head remote`): at
 * least `topLogprobs` entries, their exact f32 values and the row's log-sum-exp at temperature 1,
 * so every returned token's log-probability is the one the client's own head would give.
 */
export function logprobAsk(ask: HeadAsk, topLogprobs: number | undefined, vocab: number): HeadAsk {
  if (topLogprobs === undefined) return ask
  const minK = Math.min(vocab, Math.max(ask.minK, topLogprobs, 1))
  return { ...ask, minK, maxK: Math.max(ask.maxK, minK), valuesF32: true, logSumExp: true }
}

/** The sampled token's log-probability and the `top` likeliest, from a row that carries its log-sum-exp. */
export function rowLogprobs(row: HeadRow, token: number, top: number): TokenLogprobs {
  const lse = row.lse
  const at = row.ids.indexOf(token)
  if (lse === undefined || at < 0) throw new InvalidArgumentError(`no log-probability for token ${token} in this head reply`)
  const n = Math.min(top, row.ids.length)
  return {
    token,
    logprob: row.values[at] - lse,
    top: Array.from({ length: n }, (_, i) => ({ token: row.ids[i], logprob: row.values[i] - lse }))
  }
}

/**
 * The token a draw `u` picks under a grammar mask (`mask`: the vocabulary's row after
 * ConstrainedDecode.mask, −∞ where refused), or undefined when the reply cannot say (ask the full
 * row). The allowed tokens of the reply, in the peer's order, are the best allowed tokens of the
 * whole row, so greedy is the first of them, exactly. Sampling needs the allowed mass outside the
 * reply, which lies between 0 and the reply's tail: the pick is monotone in that mass, so when
 * both ends pick the same token every value between does, and the pick is exact.
 */
export function pickMasked(row: HeadRow, o: SamplerOptions, u: number, mask: Float32Array): number | undefined {
  const vocab = mask.length
  const ids: number[] = []
  const values: number[] = []
  for (let i = 0; i < row.ids.length; i++) {
    if (mask[row.ids[i]] === Number.NEGATIVE_INFINITY) continue
    ids.push(row.ids[i])
    values.push(row.values[i])
  }
  if (ids.length === 0) return undefined
  let allowed = 0
  for (let i = 0; i < vocab; i++) if (mask[i] !== Number.NEGATIVE_INFINITY) allowed++
  const kept: HeadRow = { ids: Uint32Array.from(ids), values: Float32Array.from(values), tail: 0 }
  // every allowed token is in the reply: a complete row of the masked distribution
  if (allowed === ids.length || row.ids.length >= vocab) return pickFromRow(kept, o, u, ids.length)
  const temperature = o.temperature ?? 1
  if (temperature === 0) return ids[0]
  // the tail relative to the best allowed value (pickFromRow measures from values[0])
  const tail = row.tail * Math.exp((row.values[0] - values[0]) / temperature)
  const low = pickFromRow(kept, o, u, vocab)
  const high = pickFromRow({ ...kept, tail }, o, u, vocab)
  return low !== undefined && low === high ? low : undefined
}
