/**
 * Generation with the head on a peer (issue #35). Greedy decoding (speculative or not) runs the
 * usual loops (shards/generate.ts, client/speculation/) over a pipeline that asks each step's
 * head and an edge whose logits are the reply's rows (−∞ outside the top-k; the argmax is the
 * peer's exact top-1), so the tokens are one process's and speculation stays lossless. Sampling
 * runs its own loop: exact within the reply, the full row when the draw lands outside it.
 */
import type { Edge, GenerateInit, HeadRow } from '../../shards/index.js'
import { createSampler, InvalidArgumentError, Xorshift64 } from '../../shards/index.js'
import { decodeTokens, type SpeculateMode, type SpeculationContext } from '../speculation/speculation.js'
import type { RemoteHead } from './remote-head.js'
import { headAsk, pickFromRow, rowLogits } from './remote-head-sampler.js'

/** The edge the greedy loops see: embeddings from the client's own, logits from the head reply. */
function replyEdge(edge: Edge, replies: () => HeadRow[]): Edge {
  const vocab = edge.config.vocabSize
  const remote = {
    config: edge.config,
    embed: (tokens: readonly number[]) => edge.embed(tokens),
    lastLogits: () => {
      const rows = replies()
      return rowLogits(rows[rows.length - 1], vocab)
    },
    logits: (_hidden: Float32Array, T: number) => {
      const rows = replies()
      if (rows.length !== T) throw new InvalidArgumentError(`the head answered ${rows.length} rows for a step of ${T}`)
      const out = new Float32Array(T * vocab)
      for (let i = 0; i < T; i++) rowLogits(rows[i], vocab, out.subarray(i * vocab, (i + 1) * vocab))
      return out
    }
  }
  // structurally what the loops call of an Edge (embed, lastLogits, logits, config)
  return remote as unknown as Edge
}

/** The tokens of one attempt with the head on `head`'s peer. */
export async function* remoteHeadTokens(
  head: RemoteHead,
  mode: SpeculateMode,
  init: GenerateInit,
  ctx: SpeculationContext
): AsyncGenerator<number> {
  if (init.constraint || init.onSampled || init.topLogprobs !== undefined) {
    throw new InvalidArgumentError('--head remote does not serve grammars, JSON schemas or logprobs yet: use --head local')
  }
  head.observeTokens(init.promptTokens)
  if ((init.temperature ?? 1) !== 0) {
    yield* sampledTokens(init, head)
    return
  }
  const vocab = init.edge.config.vocabSize
  let last: HeadRow[] = []
  const pipeline = {
    async forward(hidden: Float32Array, startPos: number, options?: Parameters<GenerateInit['pipeline']['forward']>[2]) {
      const rows = hidden.length / init.edge.config.dim
      head.ask(headAsk(init, vocab, false, startPos > 0 && rows > 1))
      const out = await init.pipeline.forward(hidden, startPos, options)
      last = head.take(out).rows
      return out
    },
    close: () => init.pipeline.close()
  }
  for await (const token of decodeTokens(mode, { ...init, pipeline, edge: replyEdge(init.edge, () => last) }, ctx)) {
    head.observeTokens([token])
    yield token
  }
}

/** Temperature sampling with the head on a peer: one draw per token, the full row only when needed. */
async function* sampledTokens(init: GenerateInit, head: RemoteHead): AsyncGenerator<number> {
  const { edge, pipeline, promptTokens, maxTokens, signal } = init
  if (!Number.isInteger(maxTokens) || maxTokens < 0)
    throw new InvalidArgumentError(`maxTokens must be an integer ≥ 0, got ${maxTokens}`)
  createSampler(init) // checks the options as generateTokens does
  const vocab = edge.config.vocabSize
  const penalised = (init.repetitionPenalty ?? 1) !== 1
  const fullSampler = penalised ? createSampler(init) : undefined
  const rng = new Xorshift64(init.seed ?? 0)
  const stop = new Set(init.stopIds ?? [])
  const history = [...promptTokens]
  let input: readonly number[] = promptTokens
  let pos = 0
  for (let i = 0; i < maxTokens; i++) {
    signal?.throwIfAborted()
    const embedded = edge.embed(input)
    head.ask(headAsk(init, vocab, false))
    let row = head.take(await pipeline.forward(embedded, pos, { signal })).rows[0]
    let next: number | undefined
    if (fullSampler) next = fullSampler.sample(rowLogits(row, vocab), history)
    else {
      const u = rng.nextF32()
      next = pickFromRow(row, init, u, vocab)
      if (next === undefined) {
        // the draw fell outside the reply: run the step again (the hops rewind) for the full row
        head.stats.fallbacks++
        head.ask(headAsk(init, vocab, true))
        row = head.take(await pipeline.forward(embedded, pos, { signal })).rows[0]
        next = pickFromRow(row, init, u, vocab) ?? row.ids[0]
      }
    }
    pos += input.length
    if (stop.has(next)) return
    history.push(next)
    head.observeTokens([next])
    yield next
    input = [next]
  }
}
