/**
 * Generation with the head on a peer (issue #35). Greedy decoding (speculative or not) runs the
 * usual loops (shards/generate.ts, client/speculation/) over a pipeline that asks each step's
 * head and an edge whose logits are the reply's rows (−∞ outside the top-k; the argmax is the
 * peer's exact top-1), so the tokens are one process's and speculation stays lossless. Sampling,
 * grammars and logprobs run one token a step (remote-head-per-token.ts).
 */
import type { Edge, GenerateInit, HeadRow } from '../../shards/index.js'
import { InvalidArgumentError } from '../../shards/index.js'
import { decodeTokens, type SpeculateMode, type SpeculationContext } from '../speculation/speculation.js'
import type { RemoteHead } from './remote-head.js'
import { perTokenRemote } from './remote-head-per-token.js'
import { headAsk, rowLogits } from './remote-head-sampler.js'

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
  head.observeTokens(init.promptTokens)
  // grammars, logprobs and sampling: one token a step (remote-head-per-token.ts)
  if ((init.temperature ?? 1) !== 0 || init.constraint || init.onSampled || init.topLogprobs !== undefined) {
    yield* perTokenRemote(init, head)
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
