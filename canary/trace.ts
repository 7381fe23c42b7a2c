import type { AbortOptions } from '@libp2p/interface'
import {
  createEdge,
  createSampler,
  createShard,
  type Edge,
  type Kernels,
  type ModelFile,
  type Sampler,
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
  /** The text is a chat template's output: its control tokens (`<|im_start|>`) are encoded as such. */
  readonly special?: boolean
  readonly seed: number
  /** Block boundaries whose states are kept (memory: levels · L · dim floats per canary). */
  readonly levels: ReadonlySet<number>
  /**
   * An earlier, shorter trace of this canary (same text, seed and levels) to continue to `length`
   * instead of generating again: its tokens go through as one prefill step, which gives the same
   * states bit for bit (a batched step equals token-by-token steps: test/shards/engine.test.ts),
   * and the sampler skips the draws that chose them, so the result equals a trace built whole.
   */
  readonly from?: CanaryTrace
}

export interface Tracer {
  trace(o: TraceOptions): CanaryTrace
  /**
   * Several canaries generated in lockstep: each step of every canary still in progress goes
   * through a block as one batch (Shard.forwardBatch) and the LM head as one matmul, so a weight
   * is read once per step for all of them. Each trace equals trace(o) alone, bit for bit (a
   * batched row is computed as that row alone: shards/batch-forward.ts). `onDone(i)` sees
   * canary i finish.
   */
  traceAll(os: readonly TraceOptions[], onDone?: (index: number) => void): CanaryTrace[]
  /** traceAll as a job that yields after each block of each lockstep step (runNow, runInSlices). */
  traceJob(os: readonly TraceOptions[], onDone?: (index: number) => void): Generator<void, CanaryTrace[]>
  close(): void
}

/** Run a sliced job to its end at once. */
export function runNow<T>(job: Generator<void, T>): T {
  for (;;) {
    const r = job.next()
    if (r.done) return r.value
  }
}

/** Run a sliced job with the event loop's turn between slices; `signal` stops it (the job's `finally` runs). */
export async function runInSlices<T>(job: Generator<void, T>, { signal }: AbortOptions = {}): Promise<T> {
  try {
    for (;;) {
      signal?.throwIfAborted()
      const r = job.next()
      if (r.done) return r.value
      await new Promise((resolve) => setImmediate(resolve))
    }
  } finally {
    job.return(undefined as T)
  }
}

let traceCounter = 0

/**
 * Generate canaries as ordinary sessions run: the prompt as one prefill step, then one sampled
 * token per step (temperature 1, as ordinary generation), recording each block's output. Stop
 * tokens are masked out of the sampling, so every canary reaches `length` positions: a decoy
 * then lasts as long as the client's real sessions, and a peer that tampers only late in a session
 * is still checked there. Real sessions that end early (a stop token) are matched by the decoy's
 * length, drawn from real ones, not by the canary.
 */
export function createTracer(model: ModelFile, kernels: Kernels, tokenizer: Tokenizer, shared?: Edge): Tracer {
  // the client's own edge when it has one (its embeddings and head on the same kernels): a
  // 151k-vocabulary head took seconds to load again per build (issue 31)
  const edge = shared ?? createEdge({ model, kernels })
  // one shard per block, loaded in the job's first slices (a block each): a background build
  // (canary/background-job.ts) then never holds the event loop for the whole model's weights
  const shards: Shard[] = []
  const job = function* (os: readonly TraceOptions[], onDone?: (index: number) => void) {
    yield* loadBlockShards(model, kernels, shards)
    return yield* traceCanaries(model, edge, shards, tokenizer, os, onDone)
  }
  return {
    trace: (o) => runNow(job([o]))[0],
    traceAll: (os, onDone) => runNow(job(os, onDone)),
    traceJob: job,
    close: () => {
      for (const s of shards) s.close()
    }
  }
}

/** Shards of one block each for the whole model, into `into` (kept there), a slice per block. */
export function* loadBlockShards(model: ModelFile, kernels: Kernels, into: Shard[]): Generator<void, Shard[]> {
  for (let l = into.length; l < model.config.nLayers; l++) {
    into.push(createShard({ model, start: l, end: l + 1, kernels }))
    yield
  }
  return into
}

/** One canary in progress. */
interface Run {
  readonly o: TraceOptions
  readonly index: number
  readonly id: string
  readonly states: (Float32Array | undefined)[]
  readonly tokens: number[]
  readonly promptLength: number
  readonly sampler: Sampler
  input: number[]
  pos: number
}

/** Draws the sampler made for `count` sampled tokens: one random number each (shards/sampler.ts). */
function skipDraws(sampler: Sampler, count: number): void {
  const one = new Float32Array(1)
  for (let i = 0; i < count; i++) sampler.sample(one)
}

function* traceCanaries(
  model: ModelFile,
  edge: Edge,
  shards: readonly Shard[],
  tokenizer: Tokenizer,
  os: readonly TraceOptions[],
  onDone?: (index: number) => void
): Generator<void, CanaryTrace[]> {
  const n = model.config.nLayers
  const dim = model.config.dim
  const stops = [tokenizer.bosId, tokenizer.eosId, ...tokenizer.stopIds].filter((t) => t >= 0 && t < model.config.vocabSize)
  const runs: Run[] = []
  try {
    for (const [index, o] of os.entries()) {
      // BOS as the file says (add_bos_token), as the client encodes its real prompts
      const prompt = o.from
        ? o.from.tokens.slice(0, o.length)
        : tokenizer.encode(o.text, { special: o.special ?? false }).slice(0, o.maxPromptTokens)
      const id = `canary-trace-${++traceCounter}`
      const promptLength = Math.min(o.from?.promptLength ?? prompt.length, o.length)
      const sampler = createSampler({ temperature: 1, seed: o.seed })
      // continuing: the tokens sampled before are input now, their draws spent
      skipDraws(sampler, prompt.length - promptLength)
      runs.push({
        o,
        index,
        id,
        states: Array.from({ length: n + 1 }, (_, k) => (o.levels.has(k) ? new Float32Array(o.length * dim) : undefined)),
        tokens: [...prompt],
        promptLength,
        sampler,
        input: prompt.slice(),
        pos: 0
      })
      // One-block sessions chained in order, so the output after every block is at hand.
      for (let l = 0; l < n; l++) shards[l].openSession(`${id}-${l}`, { maxLength: o.length })
    }
    let active = runs.filter((r) => r.pos < r.o.length)
    while (active.length > 0) {
      const rows = active.map((r) => Math.min(r.input.length, r.o.length - r.pos))
      let xs = active.map((r, i) => edge.embed(r.input.slice(0, rows[i])))
      for (const [i, r] of active.entries()) r.states[0]?.set(xs[i], r.pos * dim)
      for (let l = 0; l < n; l++) {
        xs = shards[l].forwardBatch(active.map((r, i) => ({ id: `${r.id}-${l}`, hidden: xs[i], startPos: r.pos })))
        for (const [i, r] of active.entries()) r.states[l + 1]?.set(xs[i], r.pos * dim)
        yield
      }
      active.forEach((r, i) => {
        r.pos += rows[i]
      })
      const going = active.filter((r) => r.pos < r.o.length)
      for (const r of active) if (r.pos >= r.o.length) onDone?.(r.index)
      if (going.length > 0) {
        // The LM head over the last row of every canary still going, as one matmul.
        const last = new Float32Array(going.length * dim)
        going.forEach((r, g) => {
          const i = active.indexOf(r)
          last.set(xs[i].subarray((rows[i] - 1) * dim, rows[i] * dim), g * dim)
        })
        const logits = edge.logits(last, going.length)
        const vocab = model.config.vocabSize
        going.forEach((r, g) => {
          const row = logits.subarray(g * vocab, (g + 1) * vocab)
          for (const s of stops) row[s] = Number.NEGATIVE_INFINITY
          const next = r.sampler.sample(row, r.tokens)
          r.tokens.push(next)
          r.input = [next]
        })
      }
      active = going
    }
  } finally {
    for (const r of runs) for (let l = 0; l < n; l++) shards[l].closeSession(`${r.id}-${l}`)
  }
  return runs.map((r) => ({
    text: r.o.text,
    tokens: r.tokens.slice(0, r.o.length),
    promptLength: r.promptLength,
    states: r.states
  }))
}
