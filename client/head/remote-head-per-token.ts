/**
 * One token per step with the head on a peer (issue #35, session 4): sampling, grammars and JSON
 * schemas (shards/constrain), and logprobs. Each step asks the adaptive top-k; the client masks it
 * with the grammar and picks from what came back when that is exact (remote-head-sampler.ts
 * pickMasked / pickFromRow), else runs the step again for the whole row in f32 (the hops rewind),
 * so greedy tokens are the local head's and sampling keeps the masked distribution. A step after
 * such a fallback asks the whole row at once (a grammar that refuses the likeliest tokens keeps
 * refusing them) until one whose pick lies among the likeliest few.
 *
 * Logprobs: the reply then carries f32 values and the row's log-sum-exp (HeadRequest.log_sum_exp),
 * so the sampled token's and the top_logprobs' values are the local head's; top_logprobs above the
 * reply's k are exact too, because the ask's k is at least top_logprobs.
 */
import type { GenerateInit, HeadRow } from '../../shards/index.js'
import { createSampler, InvalidArgumentError, Xorshift64 } from '../../shards/index.js'
import type { RemoteHead } from './remote-head.js'
import { headAsk, logprobAsk, pickFromRow, pickMasked, rowLogits, rowLogprobs } from './remote-head-sampler.js'

/** A pick among the likeliest this many ends the whole-row asks after a fallback. */
const BACK_TO_TOP_K_RANK = 32

export async function* perTokenRemote(init: GenerateInit, head: RemoteHead): AsyncGenerator<number> {
  const { edge, pipeline, promptTokens, maxTokens, signal, constraint } = init
  if (!Number.isInteger(maxTokens) || maxTokens < 0)
    throw new InvalidArgumentError(`maxTokens must be an integer ≥ 0, got ${maxTokens}`)
  createSampler(init) // checks the options as generateTokens does
  const vocab = edge.config.vocabSize
  const temperature = init.temperature ?? 1
  const penalised = (init.repetitionPenalty ?? 1) !== 1
  const fullSampler = penalised ? createSampler(init) : undefined
  const rng = new Xorshift64(init.seed ?? 0)
  const stop = new Set(init.stopIds ?? [])
  const history = [...promptTokens]
  const mask = constraint ? new Float32Array(vocab) : undefined
  let input: readonly number[] = promptTokens
  let pos = 0
  let wholeRow = false
  for (let i = 0; i < maxTokens; i++) {
    signal?.throwIfAborted()
    const embedded = edge.embed(input)
    const step = async (full: boolean): Promise<HeadRow> => {
      head.ask(logprobAsk(headAsk(init, vocab, full), init.topLogprobs, vocab))
      return head.take(await pipeline.forward(embedded, pos, { signal })).rows[0]
    }
    const u = temperature > 0 && !fullSampler ? rng.nextF32() : 0
    if (mask && constraint) {
      mask.fill(0)
      constraint.mask(mask, maxTokens - i)
    }
    const choose = (row: HeadRow): number | undefined => {
      if (fullSampler) {
        const logits = rowLogits(row, vocab)
        if (mask) for (let id = 0; id < vocab; id++) if (mask[id] === Number.NEGATIVE_INFINITY) logits[id] = mask[id]
        return fullSampler.sample(logits, history)
      }
      return mask ? pickMasked(row, init, u, mask) : pickFromRow(row, init, u, vocab)
    }
    let row = await step(wholeRow)
    let next = choose(row)
    if (next === undefined) {
      head.stats.fallbacks++
      row = await step(true)
      next = choose(row) ?? row.ids[0]
      wholeRow = mask !== undefined
    } else if (wholeRow && row.ids.indexOf(next) < BACK_TO_TOP_K_RANK) wholeRow = false
    pos += input.length
    constraint?.accept(next)
    init.onSampled?.(next, pos - 1, init.topLogprobs !== undefined ? rowLogprobs(row, next, init.topLogprobs) : undefined)
    if (stop.has(next)) return
    history.push(next)
    head.observeTokens([next])
    yield next
    input = [next]
  }
}
