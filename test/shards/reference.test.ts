import { describe, expect, it } from 'vitest'
import {
  createEdge,
  createLocalPipeline,
  createShard,
  generateTokens,
  type ModelFile,
  openModelFile,
  type Shard
} from '../../shards/index.js'
import { BIN_PATH, GGUF_PATH, loadReference, maxAbsDiff, TOK_PATH } from '../helpers/reference.js'

const REFS = ['stories260K_greedy_once_upon_a_time', 'stories260K_greedy_bos'] as const
const FORMATS: Array<[string, () => ModelFile]> = [
  ['gguf', () => openModelFile(GGUF_PATH)],
  ['llama2.c bin', () => openModelFile(BIN_PATH, { tokenizerPath: TOK_PATH })]
]
const SPLITS: number[][] = [
  [0, 5],
  [0, 2, 5],
  [0, 1, 3, 4, 5]
]

/** Greedy generation through `shards`, collecting logits of every position in the reference. */
async function runReference(model: ModelFile, shards: Shard[], refName: (typeof REFS)[number]) {
  const ref = loadReference(refName)
  const edge = createEdge({ model })
  // Prefill once to check every prompt position's logits (the loop below only looks at the last).
  const prefillPipe = createLocalPipeline(shards, 'prefill', 64)
  const out = await prefillPipe.forward(edge.embed(ref.prompt_tokens), 0)
  const promptLogits = edge.logits(out, ref.prompt_tokens.length)
  await prefillPipe.close()
  const logitsByPos = new Map<number, Float32Array>()
  const V = model.config.vocabSize
  for (let t = 0; t < ref.prompt_tokens.length; t++) logitsByPos.set(t, promptLogits.slice(t * V, (t + 1) * V))
  const pipeline = createLocalPipeline(shards, 'gen', model.config.seqLen)
  const tokens: number[] = []
  for await (const tok of generateTokens({
    edge,
    pipeline,
    promptTokens: ref.prompt_tokens,
    maxTokens: ref.generated_tokens.length,
    temperature: 0,
    onLogits: (l, pos) => {
      if (pos >= ref.prompt_tokens.length) logitsByPos.set(pos, Float32Array.from(l))
      else expect(maxAbsDiff(l, logitsByPos.get(pos)!)).toBe(0) // batched prefill = its last row
    }
  })) {
    tokens.push(tok)
  }
  await pipeline.close()
  return { ref, tokens, logitsByPos }
}

describe('stories260K against llama2.c', () => {
  for (const [format, open] of FORMATS) {
    for (const split of SPLITS) {
      for (const refName of REFS) {
        it(`${format}, spans ${split.join('|')}, ${refName}: same tokens, logits within 1e-4`, async () => {
          const model = open()
          const shards = split.slice(1).map((end, i) => createShard({ model, start: split[i], end }))
          const { ref, tokens, logitsByPos } = await runReference(model, shards, refName)
          expect(tokens).toEqual(ref.generated_tokens)
          expect(ref.logits.length).toBeGreaterThan(0)
          for (const entry of ref.logits) {
            const ours = logitsByPos.get(entry.pos)
            expect(ours, `logits at pos ${entry.pos}`).toBeDefined()
            expect(maxAbsDiff(ours!, entry.values)).toBeLessThan(1e-4)
          }
          model.close()
        })
      }
    }
  }
})
