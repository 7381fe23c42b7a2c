import {
  createEdge,
  createSampler,
  createShard,
  type Edge,
  type Kernels,
  type ModelFile,
  type Shard,
  type Tokenizer
} from '../shards/index.js'

/**
 * A canary's trace: a real prompt continued by the model on the client's trusted kernels, with
 * the hidden states at every block boundary for every position. One generation pass yields the
 * inputs and reference outputs of every span [b, e) at once, for any boundary b: the state
 * entering block b is the span's input, the state after block e its output (the same arithmetic a
 * peer serving [b, e) performs, block after block on the same rows).
 */
export interface CanaryTrace {
  readonly text: string
  /** Token ids [L]: the prompt's tokens (BOS first), then the sampled continuation. */
  readonly tokens: readonly number[]
  readonly promptLength: number
  /**
   * states[k] holds the hidden states [L, dim] entering block k (k = 0: the embeddings; k = n:
   * after the last block); undefined for the levels the caller did not ask for.
   */
  readonly states: readonly (Float32Array | undefined)[]
}

export interface TraceOptions {
  readonly text: string
  /** Positions in all, prompt plus continuation. */
  readonly length: number
  readonly maxPromptTokens: number
  readonly seed: number
  /** Block boundaries whose states are kept (memory: levels · L · dim floats per canary). */
  readonly levels: ReadonlySet<number>
}

export interface Tracer {
  trace(o: TraceOptions): CanaryTrace
  close(): void
}

let traceCounter = 0

/**
 * Generate one canary as an ordinary session runs: the prompt as one prefill step, then one
 * sampled token per step (temperature 1, as ordinary generation), recording each block's output.
 * Stop tokens are masked out of the sampling, so every canary reaches `length` positions: a decoy
 * then lasts as long as the client's real sessions, and a peer that tampers only late in a session
 * is still checked there. Real sessions that end early (a stop token) are matched by the decoy's
 * length, drawn from real ones, not by the canary.
 */
export function createTracer(model: ModelFile, kernels: Kernels, tokenizer: Tokenizer): Tracer {
  const edge = createEdge({ model, kernels })
  const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels })
  return { trace: (o) => traceCanary(model, edge, shard, tokenizer, o), close: () => shard.close() }
}

function traceCanary(model: ModelFile, edge: Edge, shard: Shard, tokenizer: Tokenizer, o: TraceOptions): CanaryTrace {
  const L = o.length
  const n = model.config.nLayers
  const dim = model.config.dim
  const states: (Float32Array | undefined)[] = Array.from({ length: n + 1 }, (_, k) =>
    o.levels.has(k) ? new Float32Array(L * dim) : undefined
  )
  const prompt = tokenizer.encode(o.text, { bos: true }).slice(0, o.maxPromptTokens)
  const stops = [tokenizer.bosId, tokenizer.eosId, ...tokenizer.stopIds].filter((t) => t >= 0 && t < model.config.vocabSize)
  const sampler = createSampler({ temperature: 1, seed: o.seed })
  const id = `canary-trace-${++traceCounter}`
  // One-block sessions chained in order, so the output after every block is at hand.
  for (let l = 0; l < n; l++) shard.openSession(`${id}-${l}`, { maxLength: L, start: l, end: l + 1 })
  const tokens = [...prompt]
  try {
    let input: number[] = tokens.slice()
    let pos = 0
    while (pos < L) {
      const rows = Math.min(input.length, L - pos)
      let x = edge.embed(input.slice(0, rows))
      states[0]?.set(x, pos * dim)
      for (let l = 0; l < n; l++) {
        x = shard.forward(`${id}-${l}`, x, pos)
        states[l + 1]?.set(x, pos * dim)
      }
      pos += rows
      if (pos >= L) break
      const logits = edge.lastLogits(x, rows) // the edge's own buffer: masking it in place is safe
      for (const s of stops) logits[s] = Number.NEGATIVE_INFINITY
      const next = sampler.sample(logits, tokens)
      tokens.push(next)
      input = [next]
    }
  } finally {
    for (let l = 0; l < n; l++) shard.closeSession(`${id}-${l}`)
  }
  return { text: o.text, tokens: tokens.slice(0, L), promptLength: Math.min(prompt.length, L), states }
}
