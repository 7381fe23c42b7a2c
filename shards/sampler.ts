import { InvalidArgumentError } from './errors.js'

export interface SamplerOptions {
  /** 0 means greedy (argmax). Default 1. */
  readonly temperature?: number
  /** Keep only the K most likely tokens; 0 disables. Default 0. */
  readonly topK?: number
  /** Nucleus sampling: keep the smallest set with probability ≥ P; 1 disables. Default 1. */
  readonly topP?: number
  /** RNG seed; the same seed and logits give the same tokens. Default 0. */
  readonly seed?: number
  /**
   * Penalty ≥ 1 for tokens already in the history, applied to log-probabilities:
   * logp' = logp · penalty (logp ≤ 0, so seen tokens get less likely by a factor that does not
   * depend on the logits' arbitrary zero point, unlike CTRL's division of raw logits). Default 1.
   */
  readonly repetitionPenalty?: number
  /** How many recent tokens the penalty looks at; default 64. */
  readonly repetitionWindow?: number
}

/**
 * llama2.c's xorshift64* generator (run.c random_u32 / random_f32), so a seeded run is
 * reproducible everywhere. BigInt keeps the 64-bit state exact; it runs once per token.
 */
export class Xorshift64 {
  private state: bigint
  constructor(seed: number) {
    this.state = BigInt.asUintN(64, BigInt(Math.trunc(seed)) || 0x2545f4914f6cdd1dn)
  }
  nextU32(): number {
    let s = this.state
    s ^= s >> 12n
    s = BigInt.asUintN(64, s ^ (s << 25n))
    s ^= s >> 27n
    this.state = s
    return Number(BigInt.asUintN(64, s * 0x2545f4914f6cdd1dn) >> 32n)
  }
  /** Uniform in [0, 1) with 24 bits, as random_f32. */
  nextF32(): number {
    return (this.nextU32() >>> 8) / 16777216
  }
}

export interface Sampler {
  /** Choose the next token from logits [vocab], given the tokens so far. */
  sample(logits: Float32Array, history?: readonly number[]): number
}

function argmax(x: ArrayLike<number>): number {
  let best = 0
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i
  return best
}

/** Validate sampler options (exported functions validate their inputs). */
function check(options: SamplerOptions): Required<SamplerOptions> {
  const o = {
    temperature: options.temperature ?? 1,
    topK: options.topK ?? 0,
    topP: options.topP ?? 1,
    seed: options.seed ?? 0,
    repetitionPenalty: options.repetitionPenalty ?? 1,
    repetitionWindow: options.repetitionWindow ?? 64
  }
  if (!(o.temperature >= 0) || !Number.isFinite(o.temperature))
    throw new InvalidArgumentError(`temperature must be ≥ 0, got ${o.temperature}`)
  if (!Number.isInteger(o.topK) || o.topK < 0) throw new InvalidArgumentError(`topK must be an integer ≥ 0, got ${o.topK}`)
  if (!(o.topP > 0 && o.topP <= 1)) throw new InvalidArgumentError(`topP must be in (0, 1], got ${o.topP}`)
  if (!Number.isFinite(o.seed)) throw new InvalidArgumentError(`seed must be a finite number, got ${o.seed}`)
  if (!(o.repetitionPenalty >= 1) || !Number.isFinite(o.repetitionPenalty)) {
    throw new InvalidArgumentError(`repetitionPenalty must be ≥ 1, got ${o.repetitionPenalty}`)
  }
  if (!Number.isInteger(o.repetitionWindow) || o.repetitionWindow < 0) {
    throw new InvalidArgumentError(`repetitionWindow must be an integer ≥ 0, got ${o.repetitionWindow}`)
  }
  return o
}

/** Log-softmax in float64: logp[i] = x[i] - logsumexp(x). */
export function logSoftmax(x: ArrayLike<number>): Float64Array {
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < x.length; i++) if (x[i] > max) max = x[i]
  let sum = 0
  for (let i = 0; i < x.length; i++) sum += Math.exp(x[i] - max)
  const lse = max + Math.log(sum)
  const out = new Float64Array(x.length)
  for (let i = 0; i < x.length; i++) out[i] = x[i] - lse
  return out
}

/**
 * Sampling over the whole vocabulary (no cut) in index order: the same float64 arithmetic, in the
 * same order, as the general path below, so the same token for the same draw; in typed arrays
 * and plain loops instead of arrays of indices and closures, which on a 151,936-token vocabulary
 * took ~50 ms a token (issue 31: canary prompts and traces sample hundreds of tokens at start).
 */
function sampleAll(scores: ArrayLike<number>, temperature: number, rng: Xorshift64): number {
  const n = scores.length
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < n; i++) if (scores[i] > max) max = scores[i]
  const probs = new Float64Array(n)
  let mass = 0
  for (let i = 0; i < n; i++) {
    const p = Math.exp((scores[i] - max) / temperature)
    probs[i] = p
    mass += p
  }
  const r = rng.nextF32() * mass
  let cdf = 0
  for (let i = 0; i < n; i++) {
    cdf += probs[i]
    if (r < cdf) return i
  }
  return n - 1
}

/** A token sampler: greedy at temperature 0, else top-k/top-p with a seeded generator. */
export function createSampler(options: SamplerOptions = {}): Sampler {
  const o = check(options)
  const rng = new Xorshift64(o.seed)
  return {
    sample(logits, history = []) {
      if (logits.length === 0) throw new InvalidArgumentError('cannot sample from empty logits')
      let scores: ArrayLike<number> = logits
      if (o.repetitionPenalty !== 1 && history.length > 0 && o.repetitionWindow > 0) {
        const lp = logSoftmax(logits)
        const seen = new Set(history.slice(-o.repetitionWindow))
        for (const id of seen) if (id >= 0 && id < lp.length) lp[id] *= o.repetitionPenalty
        scores = lp
      }
      if (o.temperature === 0) return argmax(scores)
      // Candidates sorted by score, cut by top-k, then softmax at the temperature, then top-p.
      // With neither cut, sample in index order and skip the sort (it costs more than the head).
      const n = scores.length
      if (o.topK === 0 && o.topP === 1) return sampleAll(scores, o.temperature, rng)
      let order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b)
      if (o.topK > 0 && o.topK < n) order = order.slice(0, o.topK)
      let max = Number.NEGATIVE_INFINITY
      for (const i of order) if (scores[i] > max) max = scores[i]
      const probs = order.map((i) => Math.exp((scores[i] - max) / o.temperature))
      const total = probs.reduce((a, b) => a + b, 0)
      let keep = probs.length
      if (o.topP < 1) {
        let cum = 0
        for (let i = 0; i < probs.length; i++) {
          cum += probs[i] / total
          if (cum >= o.topP) {
            keep = i + 1
            break
          }
        }
      }
      let mass = 0
      for (let i = 0; i < keep; i++) mass += probs[i]
      const r = rng.nextF32() * mass
      let cdf = 0
      for (let i = 0; i < keep; i++) {
        cdf += probs[i]
        if (r < cdf) return order[i]
      }
      return order[keep - 1]
    }
  }
}
