/**
 * What batching buys a node by itself (issue #18), without the network or the clients: the
 * decode steps of `sessions` sessions through one span, once session by session (Shard.forward,
 * as a node without batching ran them) and once as one batched forward per round
 * (Shard.forwardBatch), on the same kernels; checks that both give the same bits.
 */
import { createShard, type Kernels, type ModelFile } from '../shards/index.js'
import { round } from './swarm-stats.js'

export interface SpanBatchResult {
  readonly span: [number, number]
  readonly sessions: number
  readonly rounds: number
  /** Decode rows per second through the span, one session at a time. */
  readonly aloneRowsPerSecond: number
  /** The same rows batched, one forward per round. */
  readonly batchedRowsPerSecond: number
  readonly speedup: number
  readonly sameBits: boolean
}

export function spanBatchBench(
  model: ModelFile,
  kernels: Kernels,
  span: [number, number],
  sessions: number,
  rounds = 8
): SpanBatchResult {
  const { dim } = model.config
  const alone = createShard({ model, start: span[0], end: span[1], kernels })
  const batched = createShard({ model, start: span[0], end: span[1], kernels })
  const ids = Array.from({ length: sessions }, (_, i) => `s${i}`)
  const row = (i: number, r: number) => Float32Array.from({ length: dim }, (_, k) => Math.sin(i * 7 + r * 13 + k) * 0.5)
  for (const s of [alone, batched]) for (const id of ids) s.openSession(id, { maxLength: rounds + 8 })
  let aloneMs = 0
  let batchedMs = 0
  let same = true
  for (let r = 0; r < rounds; r++) {
    const inputs = ids.map((_, i) => row(i, r))
    let t = performance.now()
    const a = ids.map((id, i) => alone.forward(id, inputs[i], r))
    aloneMs += performance.now() - t
    t = performance.now()
    const b = batched.forwardBatch(ids.map((id, i) => ({ id, hidden: inputs[i], startPos: r })))
    batchedMs += performance.now() - t
    for (let i = 0; i < sessions; i++) {
      if (!Buffer.from(a[i].buffer).equals(Buffer.from(b[i].buffer))) same = false
    }
  }
  alone.close()
  batched.close()
  const rows = sessions * rounds
  return {
    span,
    sessions,
    rounds,
    aloneRowsPerSecond: round((rows * 1000) / aloneMs, 1),
    batchedRowsPerSecond: round((rows * 1000) / batchedMs, 1),
    speedup: round(aloneMs / batchedMs, 2),
    sameBits: same
  }
}
