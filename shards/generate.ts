import { logprobStats, type TokenLogprobs } from './constrain/logprobs.js'
import type { ConstrainedDecode } from './constrain/token-mask.js'
import type { Edge } from './edge.js'
import { InvalidArgumentError } from './errors.js'
import { createSampler, type SamplerOptions } from './sampler.js'
import type { ShardLike } from './shard.js'
import type { AbortOptions } from './types.js'

/**
 * Everything between the edge's embedding and its head: local shards, or (in client/) a chain
 * of remote hops. It owns one session's KV state.
 */
export interface BlockPipeline {
  /** Hidden states [T, dim] at positions startPos .. startPos+T-1 → outputs [T, dim]. */
  forward(hidden: Float32Array, startPos: number, options?: AbortOptions): Promise<Float32Array>
  close(): Promise<void>
}

export interface LocalPipelineOptions {
  /** Each block of a step finished: (blocks done, blocks in all, rows in the step); progress of long prefills. */
  readonly onBlock?: (done: number, total: number, rows: number) => void
}

/** Runs local shards one after another for one session. */
export function createLocalPipeline(
  shards: readonly ShardLike[],
  sessionId: string,
  maxLength: number,
  options: LocalPipelineOptions = {}
): BlockPipeline {
  for (const s of shards) s.openSession(sessionId, { maxLength })
  const total = shards.reduce((n, s) => n + s.end - s.start, 0)
  return {
    async forward(hidden, startPos, { signal } = {}) {
      let h = hidden
      let before = 0
      const rows = hidden.length / (shards[0]?.config.dim ?? 1)
      const onBlock = options.onBlock
      for (const s of shards) {
        signal?.throwIfAborted()
        const base = before
        h = s.forward(sessionId, h, startPos, onBlock ? (done) => onBlock(base + done, total, rows) : undefined)
        before += s.end - s.start
      }
      return h
    },
    async close() {
      for (const s of shards) s.closeSession(sessionId)
    }
  }
}

export interface GenerateInit extends SamplerOptions {
  readonly edge: Edge
  readonly pipeline: BlockPipeline
  /** The prompt as token ids (with BOS when the model wants it). */
  readonly promptTokens: readonly number[]
  readonly maxTokens: number
  /** Generation ends when one of these is sampled (it is not yielded). */
  readonly stopIds?: readonly number[]
  readonly signal?: AbortSignal
  /**
   * Sees the logits of every step: the prompt's last position, then each generated token's. The
   * array is reused for the next step (Edge.lastLogits): copy it to keep it.
   */
  readonly onLogits?: (logits: Float32Array, position: number) => void
  /** Constrained sampling (shards/constrain): tokens the grammar refuses get -∞ before each sample. */
  readonly constraint?: ConstrainedDecode
  /** With onSampled: how many likeliest tokens to report with each sampled one's log-probability. */
  readonly topLogprobs?: number
  /** Each sampled token (stop ids too) at its position, with its log-probability when topLogprobs is set. */
  readonly onSampled?: (token: number, position: number, logprobs?: TokenLogprobs) => void
}

/**
 * The decode loop: one batched step for the whole prompt (prefill), then one step per token.
 * Yields generated token ids as they are sampled.
 */
export async function* generateTokens(init: GenerateInit): AsyncGenerator<number> {
  const { edge, pipeline, promptTokens, maxTokens, signal } = init
  if (promptTokens.length === 0) throw new InvalidArgumentError('the prompt must hold at least one token (BOS)')
  if (!Number.isInteger(maxTokens) || maxTokens < 0)
    throw new InvalidArgumentError(`maxTokens must be an integer ≥ 0, got ${maxTokens}`)
  const sampler = createSampler(init)
  const stop = new Set(init.stopIds ?? [])
  const history = [...promptTokens]
  let input: readonly number[] = promptTokens
  let pos = 0
  for (let i = 0; i < maxTokens; i++) {
    // A macrotask turn per step: a local pipeline's forward is synchronous work, and awaiting
    // it only runs microtasks, so a SIGINT (delivered through the event loop) was never seen
    // and Ctrl-C went ignored until the context was full (issue #31).
    if (signal) await new Promise<void>((resolve) => setImmediate(resolve))
    signal?.throwIfAborted()
    const out = await pipeline.forward(edge.embed(input), pos, { signal })
    pos += input.length
    const logits = edge.lastLogits(out, input.length)
    // log-probabilities of the model's own distribution, before the grammar narrows it
    const stats = init.topLogprobs !== undefined ? logprobStats(logits, init.topLogprobs) : undefined
    init.constraint?.mask(logits, maxTokens - i)
    init.onLogits?.(logits, pos - 1)
    const next = sampler.sample(logits, history)
    init.constraint?.accept(next)
    init.onSampled?.(next, pos - 1, stats && { token: next, logprob: logits[next] - stats.lse, top: stats.top })
    if (stop.has(next)) return
    history.push(next)
    yield next
    input = [next]
  }
}
