/**
 * `npm run bench -- constrain [--vocab qwen|llama3] [--tokens N] [--runs N] [--model FILE]`:
 * the per-token cost of constrained sampling (issue 37) on a real vocabulary (Qwen's 151,936
 * tokens by default): mask() + accept() of every token of constrained decodes with random logits,
 * for a strict json_schema and for json_object. With --model (e.g. make-model --shape 1.1b
 * --dtype q8_0), the same run times unconstrained decode steps of that model in one process,
 * and reports the mask as a fraction of a step (issue target: ≤ 10 % of a 1.1b step).
 */
import { anyObject, compileSchema, createConstraint, type GrammarNode, vocabTrieOf } from '../shards/constrain/index.js'
import {
  createEdge,
  createLocalPipeline,
  createSampler,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile,
  selectKernelsFor
} from '../shards/index.js'
import { packageTokenizer, type VocabPackageName } from '../shards/tokenizers/vocab-packages.js'
import { benchArgs } from './options.js'

const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    age: { type: 'integer' },
    email: { type: 'string' },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 4 },
    address: {
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' }, zip: { type: 'string' } },
      required: ['street', 'city', 'zip'],
      additionalProperties: false
    },
    active: { type: 'boolean' },
    score: { anyOf: [{ type: 'number' }, { type: 'null' }] }
  },
  required: ['name', 'age', 'email', 'tags', 'address', 'active', 'score'],
  additionalProperties: false
}

const round = (x: number, d = 3): number => Number(x.toFixed(d))
const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]

function maskTimes(vocab: VocabPackageName, grammar: GrammarNode, tokens: number, runs: number) {
  const tokenizer = packageTokenizer(vocab)
  const c = createConstraint(tokenizer, grammar)
  const times: number[] = []
  let lcg = 12345
  const logits = new Float32Array(tokenizer.vocabSize)
  for (let run = 0; run < runs; run++) {
    const d = c.start()
    const sampler = createSampler({ seed: run + 1 })
    for (let i = 0; i < tokens; i++) {
      for (let j = 0; j < logits.length; j++) {
        lcg = (Math.imul(lcg, 1103515245) + 12345) >>> 0
        logits[j] = (lcg >>> 8) / 4194304
      }
      const t0 = performance.now()
      d.mask(logits, tokens - i)
      const t1 = performance.now()
      const t = sampler.sample(logits)
      const t2 = performance.now()
      if (tokenizer.stopIds.includes(t)) break
      d.accept(t)
      times.push(t1 - t0 + (performance.now() - t2))
    }
  }
  return {
    tokens: times.length,
    meanMs: round(times.reduce((a, b) => a + b, 0) / times.length),
    p50Ms: round(pct(times, 0.5)),
    p95Ms: round(pct(times, 0.95)),
    maxMs: round(Math.max(...times))
  }
}

async function decodeStepMs(path: string, tokens: number): Promise<number> {
  const model = openModelFile(path)
  const kernels = selectKernelsFor(model.config, { kind: 'auto' })
  try {
    const edge = createEdge({ model, kernels })
    const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels })
    const tok = createTokenizer(model.vocabulary!)
    const prompt = tok.encode('Once upon a time')
    const pipeline = createLocalPipeline([shard], 'bench', prompt.length + tokens + 1)
    const stamps: number[] = []
    for await (const _ of generateTokens({ edge, pipeline, promptTokens: prompt, maxTokens: tokens, temperature: 0 }))
      stamps.push(performance.now())
    await pipeline.close()
    const steps = stamps.slice(1).map((t, i) => t - stamps[i])
    return pct(steps, 0.5)
  } finally {
    kernels.close?.()
    model.close()
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, { vocab: 'qwen', tokens: '96', runs: '3', model: undefined, 'gen-tokens': '12' })
  const vocab = a.oneOf('vocab', ['qwen', 'llama3'] as const)
  const tokens = a.int('tokens', 8)
  const runs = a.int('runs', 1)
  const t0 = performance.now()
  vocabTrieOf(packageTokenizer(vocab))
  const trieBuildMs = round(performance.now() - t0, 0)
  const jsonSchema = maskTimes(vocab, compileSchema(SCHEMA), tokens, runs)
  const jsonObject = maskTimes(vocab, anyObject(), tokens, runs)
  const model = a.string('model')
  const stepMs = model ? await decodeStepMs(model, a.int('gen-tokens', 2)) : undefined
  console.log(
    JSON.stringify(
      {
        bench: 'constrain',
        vocab,
        vocabSize: packageTokenizer(vocab).vocabSize,
        note: 'mask + accept per token (sampling excluded), random logits; tokenizer and trie built once per client',
        tokenizerAndTrieBuildMs: trieBuildMs,
        jsonSchema,
        jsonObject,
        ...(stepMs !== undefined
          ? {
              decodeStep: { model, medianMs: round(stepMs) },
              maskFractionOfStep: {
                jsonSchema: round(jsonSchema.meanMs / stepMs),
                jsonObject: round(jsonObject.meanMs / stepMs)
              },
              target: 0.1
            }
          : {})
      },
      null,
      2
    )
  )
}
