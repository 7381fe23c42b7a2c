import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  anyObject,
  compileSchema,
  createConstraint,
  type GrammarNode,
  UnsupportedSchemaError
} from '../../shards/constrain/index.js'
import {
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  createTokenizer,
  type Edge,
  generateTokens,
  type ModelFile,
  openModelFile,
  type Shard,
  type Tokenizer
} from '../../shards/index.js'
import { writeQwenVocabModel } from '../helpers/qwen-vocab-model.js'

// Issue 37: constrained sampling on a random-weight model with Qwen 3's real 151,936-token
// vocabulary. Random weights write no JSON by themselves, so every valid output is the mask's doing.

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    age: { type: 'integer' },
    tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, maxItems: 3 },
    active: { type: 'boolean' },
    score: { anyOf: [{ type: 'number' }, { type: 'null' }] }
  },
  required: ['name', 'age', 'tags', 'active', 'score'],
  additionalProperties: false
}

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-constrain-'))
const path = join(dir, 'qwen-vocab.gguf')
let model: ModelFile
let tokenizer: Tokenizer
let edge: Edge
let shard: Shard
let prompt: number[]

async function sample(grammar: GrammarNode | undefined, seed: number, maxTokens: number): Promise<string> {
  const out: number[] = []
  const session = `s${seed}-${Math.random()}`
  const pipeline = createLocalPipeline([shard], session, prompt.length + maxTokens)
  const constraint = grammar && createConstraint(tokenizer, grammar).start()
  for await (const t of generateTokens({
    edge,
    pipeline,
    promptTokens: prompt,
    maxTokens,
    seed,
    stopIds: tokenizer.stopIds,
    constraint
  }))
    out.push(t)
  await pipeline.close()
  return tokenizer.decode(out)
}

describe('constrained sampling (JSON schema → token mask) on a real vocabulary', () => {
  const ajv = new Ajv()
  const valid = ajv.compile(PERSON)

  beforeAll(() => {
    writeQwenVocabModel(path, { layers: 2, seed: 9, seqLen: 96 })
    model = openModelFile(path)
    tokenizer = createTokenizer(model.vocabulary!)
    const kernels = createReferenceKernels()
    edge = createEdge({ model, kernels })
    shard = createShard({ model, start: 0, end: 2, kernels })
    prompt = tokenizer.encode('<|im_start|>user\nJSON<|im_end|>\n<|im_start|>assistant\n', { special: true })
  }, 120_000)

  afterAll(() => {
    model?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('50 seeds (a random-weight model, the Qwen vocabulary): every output validates against the schema within max_tokens; unconstrained ones do not', async () => {
    const grammar = compileSchema(PERSON)
    const texts: string[] = []
    for (let seed = 1; seed <= 50; seed++) {
      const text = await sample(grammar, seed, 32)
      expect(valid(JSON.parse(text)), `${text}: ${ajv.errorsText(valid.errors)}`).toBe(true)
      texts.push(text)
    }
    expect(new Set(texts).size).toBeGreaterThan(45)
    for (let seed = 1; seed <= 3; seed++) {
      const free = await sample(undefined, seed, 40)
      expect(() => JSON.parse(free)).toThrow()
    }
  }, 600_000)

  it('json_object mode gives a JSON object', async () => {
    for (let seed = 1; seed <= 5; seed++) {
      const parsed = JSON.parse(await sample(anyObject(), seed, 30))
      expect(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)).toBe(true)
    }
  }, 300_000)

  it('refuses keywords it cannot enforce with a typed error', () => {
    expect(() => compileSchema({ type: 'string', pattern: '^a+$' })).toThrow(UnsupportedSchemaError)
    expect(() => compileSchema({ type: 'object', properties: {}, patternProperties: {} })).toThrow(/patternProperties/)
  })
})
