import { logSoftmax, type SamplerOptions, type Xorshift64 } from '../../shards/index.js'
import { InvalidSpeculationError } from '../errors.js'

/**
 * The distribution shards/sampler.ts samples from, as a dense vector over the vocabulary: the
 * same repetition penalty (on log-probabilities), top-k on the scores, softmax at the
 * temperature, then top-p in score order. Speculative sampling needs the target's probabilities,
 * not one draw; this is the sampler's computation written out (a change there must come here too:
 * the distribution test in test/client/speculative-sampling.test.ts compares the two).
 */
export function targetProbs(logits: Float32Array, history: readonly number[], o: SamplerOptions): Float64Array {
  const temperature = o.temperature ?? 1
  const topK = o.topK ?? 0
  const topP = o.topP ?? 1
  const penalty = o.repetitionPenalty ?? 1
  const window = o.repetitionWindow ?? 64
  if (!(temperature > 0)) throw new InvalidSpeculationError(`targetProbs needs a temperature > 0, got ${temperature}`)
  let scores: ArrayLike<number> = logits
  if (penalty !== 1 && history.length > 0 && window > 0) {
    const lp = logSoftmax(logits)
    for (const id of new Set(history.slice(-window))) if (id >= 0 && id < lp.length) lp[id] *= penalty
    scores = lp
  }
  const n = scores.length
  let order: number[]
  if (topK === 0 && topP === 1) order = Array.from({ length: n }, (_, i) => i)
  else {
    order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b)
    if (topK > 0 && topK < n) order = order.slice(0, topK)
  }
  let max = Number.NEGATIVE_INFINITY
  for (const i of order) if (scores[i] > max) max = scores[i]
  const probs = order.map((i) => Math.exp((scores[i] - max) / temperature))
  const total = probs.reduce((a, b) => a + b, 0)
  let keep = probs.length
  if (topP < 1) {
    let cum = 0
    for (let i = 0; i < probs.length; i++) {
      cum += probs[i] / total
      if (cum >= topP) {
        keep = i + 1
        break
      }
    }
  }
  let mass = 0
  for (let i = 0; i < keep; i++) mass += probs[i]
  const out = new Float64Array(n)
  for (let i = 0; i < keep; i++) out[order[i]] = probs[i] / mass
  return out
}

/** One draw from a distribution (sums to 1 up to rounding); the last non-zero entry absorbs rounding. */
export function sampleFrom(p: Float64Array, rng: Xorshift64): number {
  const r = rng.nextF32()
  let cdf = 0
  let last = -1
  for (let i = 0; i < p.length; i++) {
    if (p[i] <= 0) continue
    last = i
    cdf += p[i]
    if (r < cdf) return i
  }
  if (last < 0) throw new InvalidSpeculationError('cannot sample from a distribution with no mass')
  return last
}

/**
 * The speculative sampling rule (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023): a drafted
 * token x drawn from q is kept with probability min(1, p(x)/q(x)); when rejected, the token is
 * drawn from norm(max(0, p − q)). The result is distributed exactly as p. `q` undefined means the
 * draft was deterministic (q = 1 at x): keep with probability p(x), else draw from p without x.
 * Returns the token and whether the draft was kept.
 */
export function acceptOrResample(
  p: Float64Array,
  drafted: number,
  q: Float64Array | undefined,
  rng: Xorshift64
): { token: number; accepted: boolean } {
  if (!Number.isInteger(drafted) || drafted < 0 || drafted >= p.length)
    throw new InvalidSpeculationError(`drafted token ${drafted} is outside the vocabulary of ${p.length}`)
  if (q !== undefined && q.length !== p.length)
    throw new InvalidSpeculationError(`draft distribution has ${q.length} entries, the target ${p.length}`)
  const qx = q === undefined ? 1 : q[drafted]
  const px = p[drafted]
  if (qx > 0 && rng.nextF32() < Math.min(1, px / qx)) return { token: drafted, accepted: true }
  const residual = new Float64Array(p.length)
  let mass = 0
  for (let i = 0; i < p.length; i++) {
    const qi = q === undefined ? (i === drafted ? 1 : 0) : q[i]
    const r = p[i] - qi
    if (r > 0) {
      residual[i] = r
      mass += r
    }
  }
  // p = q exactly leaves no residual; then rejection has probability 0 and any p-draw is right
  if (!(mass > 0)) return { token: sampleFrom(p, rng), accepted: false }
  for (let i = 0; i < residual.length; i++) residual[i] /= mass
  return { token: sampleFrom(residual, rng), accepted: false }
}
