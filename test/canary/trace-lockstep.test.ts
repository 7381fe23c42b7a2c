import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createRandom } from '../../canary/rng.js'
import { createTracer, type TraceOptions } from '../../canary/trace.js'
import { DEFAULT_CANARY_PROMPT_TEMPERATURE } from '../../client/options.js'
import { secretPrompts, secretSeed } from '../../client/verification/canaries/canary-secret.js'
import {
  createEdge,
  createFastKernels,
  createReferenceKernels,
  createSampler,
  createShard,
  createTokenizer,
  type Kernels,
  type ModelFile,
  openModelFile,
  parseShape,
  writeRandomModel
} from '../../shards/index.js'

// Canaries are generated in lockstep (canary/trace.ts traceAll, client/verification/canaries/canary-secret.ts): a
// batch of every canary's step per block and one LM-head matmul. The traces and the sampled
// prompts must be those of generating each canary alone, bit for bit, so verification is as
// strong as before; checked on f32 weights (reference kernels) and on a Q4_K_M file with the
// fast kernels (batched quantised matmuls against decode ones).

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-trace-lockstep-'))
const q4km = join(dir, 'q4km.gguf')
writeRandomModel(q4km, parseShape('256,3,4,2,512,600,untied'), { dtype: 'q4_k_m', seed: 5 })
afterAll(() => rmSync(dir, { recursive: true, force: true }))

// [name, model, kernels, canaries]: 9 canaries make decode batches of 9 rows and more, where
// the quantised kernels switch to their batched path (docs/performance.md).
const cases: Array<[string, () => ModelFile, () => Kernels, number]> = [
  ['stories260K, reference kernels', () => openModelFile('models/stories260K.gguf'), () => createReferenceKernels(), 3],
  ['Q4_K_M, fast kernels', () => openModelFile(q4km), () => createFastKernels({ threads: 2 }), 9]
]

/** client/verification/canaries/canary-secret.ts's model-sampled prompts, one prompt after another (the slow reference). */
function secretPromptsAlone(model: ModelFile, secret: Uint8Array, count: number, kernels: Kernels): string[] {
  const rnd = createRandom(secretSeed(secret, 'prompts'))
  const tokenizer = createTokenizer(model.vocabulary!)
  const edge = createEdge({ model, kernels })
  const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels })
  const stops = [tokenizer.bosId, tokenizer.eosId, ...tokenizer.stopIds].filter((s) => s >= 0)
  const out: string[] = []
  for (let i = 0; i < count; i++) {
    const sampler = createSampler({ temperature: DEFAULT_CANARY_PROMPT_TEMPERATURE, seed: secretSeed(secret, `prompt-${i}`) })
    const len = 4 + rnd.int(21)
    const total = Math.min(model.config.seqLen - 1, len + 48)
    shard.openSession(`alone-${i}`, { maxLength: total + 1 })
    const tokens = [tokenizer.bosId]
    let input = [tokenizer.bosId]
    for (let pos = 0; tokens.length <= total; pos += input.length) {
      const logits = edge.lastLogits(shard.forward(`alone-${i}`, edge.embed(input), pos), input.length)
      for (const s of stops) logits[s] = Number.NEGATIVE_INFINITY
      tokens.push(sampler.sample(logits, tokens))
      input = [tokens.at(-1)!]
    }
    shard.closeSession(`alone-${i}`)
    const starts = [1]
    for (let k = 2; k + len <= tokens.length; k++) if (/[.!?]["']?\s*$/.test(tokenizer.decode([tokens[k - 1]]))) starts.push(k)
    const skip = starts[rnd.int(starts.length)] - 1
    let end = Math.min(tokens.length, 1 + skip + len)
    while (end < tokens.length && !/[.!?]["']?\s*$/.test(tokenizer.decode([tokens[end - 1]]))) end++
    const text = tokenizer.decode(tokens.slice(1 + skip, end)).trim()
    out.push(text.length > 0 ? text : tokenizer.decode(tokens.slice(1)).trim() || 'a')
  }
  return out
}

describe('canaries in lockstep', () => {
  for (const [name, open, kernelsOf, count] of cases) {
    it(`trace equal to one canary at a time, bit for bit (${name})`, { timeout: 120_000 }, () => {
      const model = open()
      const kernels = kernelsOf()
      try {
        const tracer = createTracer(model, kernels, createTokenizer(model.vocabulary!))
        const n = model.config.nLayers
        const levels = new Set([0, 1, n])
        // different prompt and total lengths: canaries join and leave the batch at different steps
        const texts = [
          'Once upon a time, there was a little cat.',
          'Tom went to the park.',
          'The sun was warm and the sky was blue.'
        ]
        const os: TraceOptions[] = Array.from({ length: count }, (_, i) => ({
          text: texts[i % 3],
          length: 14 + 5 * (i % 3) + i,
          maxPromptTokens: 3 + 4 * (i % 3),
          seed: 11 + i,
          levels
        }))
        const done: number[] = []
        const together = tracer.traceAll(os, (i) => done.push(i))
        expect(done.sort((a, b) => a - b)).toEqual(os.map((_, i) => i))
        os.forEach((o, i) => {
          const alone = tracer.trace(o)
          expect(together[i].tokens).toEqual(alone.tokens)
          expect(together[i].tokens).toHaveLength(o.length)
          expect(together[i].promptLength).toBe(alone.promptLength)
          for (let k = 0; k <= n; k++) {
            if (!levels.has(k)) expect(together[i].states[k]).toBeUndefined()
            else expect(Buffer.from(together[i].states[k]!.buffer).equals(Buffer.from(alone.states[k]!.buffer))).toBe(true)
          }
        })
        tracer.close()
      } finally {
        kernels.close?.()
        model.close()
      }
    })

    it(`secret prompts sample the tokens of each prompt alone (${name})`, { timeout: 120_000 }, () => {
      const model = open()
      const kernels = kernelsOf()
      try {
        const secret = new Uint8Array(32).fill(7)
        const prompts = secretPrompts(model, secret, { count: count + 1, kernels })
        expect(prompts).toEqual(secretPromptsAlone(model, secret, count + 1, kernels))
        expect(new Set(prompts).size).toBeGreaterThan(1)
      } finally {
        kernels.close?.()
        model.close()
      }
    })
  }
})
