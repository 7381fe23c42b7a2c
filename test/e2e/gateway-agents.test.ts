import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createChatFormatter } from '../../node/gateway/chat-template.js'
import type { TokenLogprobs } from '../../shards/constrain/index.js'
import {
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile
} from '../../shards/index.js'
import { loadPackageVocabulary } from '../../shards/tokenizers/vocab-packages.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { writeQwenVocabModel } from '../helpers/qwen-vocab-model.js'

// Issue 37: structured output, logprobs, n and seed through the official openai client, on a
// random-weight model with Qwen 3's real 151,936-token vocabulary served by a 2-process swarm.
// Random weights are the hard case: unconstrained, the model writes no JSON at all.

const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gw-agents-'))
const model = join(dir, 'qwen-vocab.gguf')
const NAME = 'qwen-vocab'

const SCHEMA = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    days: { type: 'integer' },
    units: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    alerts: { type: 'array', items: { type: 'boolean' }, maxItems: 3 },
    note: { anyOf: [{ type: 'string' }, { type: 'null' }] }
  },
  required: ['city', 'days', 'units', 'alerts', 'note'],
  additionalProperties: false
}

describe('gateway for agents: structured output, logprobs, n, seed (openai client, Qwen vocabulary)', () => {
  const nodes: LocalNode[] = []
  let api: RunningApi
  let client: OpenAI
  const ajv = new Ajv()
  const valid = ajv.compile(SCHEMA)

  beforeAll(async () => {
    writeQwenVocabModel(model, { layers: 4, seed: 21, seqLen: 192 })
    nodes.push(await startLocalNode({ model, layers: '0:3', args: FAST, startTimeoutMs: 90_000 }))
    nodes.push(await startLocalNode({ model, layers: '2:4', bootstrap: [nodes[0].addrs[0]], args: FAST, startTimeoutMs: 90_000 }))
    api = await startGatewayApi({ model, bootstrap: nodes[0].addrs[0], routeTimeout: 60_000 })
    client = new OpenAI({ baseURL: `${api.gateway.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 })
  }, 240_000)

  afterAll(async () => {
    await api?.close()
    await Promise.all(nodes.map((n) => n.stop()))
    rmSync(dir, { recursive: true, force: true })
  })

  // 50 seeds of the same model file in one process: test/shards/constrain.test.ts
  it('json_schema: 8 sampled choices (8 seeds) through the swarm all validate; unconstrained ones do not', async () => {
    const ask = { model: NAME, messages: [{ role: 'user' as const, content: 'Weather as JSON' }], max_tokens: 32, seed: 1000 }
    const res = await client.chat.completions.create({
      ...ask,
      n: 8,
      response_format: { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema: SCHEMA } }
    })
    expect(res.choices).toHaveLength(8)
    for (const c of res.choices) {
      const parsed = JSON.parse(c.message.content ?? '')
      expect(valid(parsed), `${c.message.content}: ${ajv.errorsText(valid.errors)}`).toBe(true)
    }
    expect(new Set(res.choices.map((c) => c.message.content)).size).toBe(8)
    expect(res.usage?.completion_tokens).toBeGreaterThan(8 * 10)
    const free = await client.chat.completions.create({ ...ask, n: 2 })
    const parses = free.choices.filter((c) => {
      try {
        return valid(JSON.parse(c.message.content ?? ''))
      } catch {
        return false
      }
    })
    expect(parses).toHaveLength(0)
  }, 900_000)

  it('json_object, streamed: the content deltas join into a JSON object', async () => {
    const stream = await client.chat.completions.create({
      model: NAME,
      messages: [{ role: 'user', content: 'JSON please' }],
      max_tokens: 24,
      seed: 5,
      stream: true,
      response_format: { type: 'json_object' }
    })
    let text = ''
    let finish: string | null = null
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
    }
    const parsed = JSON.parse(text)
    expect(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)).toBe(true)
    expect(finish).not.toBeNull()
  }, 300_000)

  it("logprobs equal the log-softmax of the model's own logits (greedy, top_logprobs 3)", async () => {
    const res = await client.chat.completions.create({
      model: NAME,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 5,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3
    })
    const content = res.choices[0].logprobs?.content ?? []
    expect(content).toHaveLength(res.usage?.completion_tokens ?? -1)
    // the same prompt through one local process, reference kernels: its log-probabilities
    const m = openModelFile(model)
    const tok = createTokenizer(m.vocabulary!)
    const chat = createChatFormatter({
      template: loadPackageVocabulary('qwen').chatTemplate,
      bosToken: '',
      eosToken: '',
      addsBos: false
    })
    const prompt = tok.encode(chat.render([{ role: 'user', content: 'Hi' }]), { special: true })
    expect(res.usage?.prompt_tokens).toBe(prompt.length)
    const kernels = createReferenceKernels()
    const edge = createEdge({ model: m, kernels })
    const shard = createShard({ model: m, start: 0, end: m.config.nLayers, kernels })
    const local: TokenLogprobs[] = []
    const tokens: number[] = []
    const run = generateTokens({
      edge,
      pipeline: createLocalPipeline([shard], 'local', 64),
      promptTokens: prompt,
      maxTokens: content.length,
      temperature: 0,
      stopIds: tok.stopIds,
      topLogprobs: 3,
      onSampled: (_t, _p, lp) => lp && local.push(lp)
    })
    for await (const t of run) tokens.push(t)
    m.close()
    expect(res.choices[0].message.content).toBe(tok.decode(tokens))
    content.forEach((c, i) => {
      expect(c.logprob).toBeCloseTo(local[i].logprob, 4)
      expect(c.bytes).toEqual([...tok.tokenBytes(local[i].token)])
      expect(c.top_logprobs.map((t) => t.logprob)).toEqual(local[i].top.map((t) => expect.closeTo(t.logprob, 4)))
      expect(c.top_logprobs[0].logprob).toBeCloseTo(c.logprob, 6) // greedy: the likeliest
    })
  }, 300_000)

  it('n = 3 samples three different choices; the same seed gives the same three again; usage is exact', async () => {
    const ask = {
      model: NAME,
      messages: [{ role: 'user' as const, content: 'Tell me' }],
      max_tokens: 5,
      n: 3,
      seed: 77,
      logprobs: true
    }
    const a = await client.chat.completions.create(ask)
    const b = await client.chat.completions.create(ask)
    const texts = a.choices.map((c) => c.message.content)
    expect(new Set(texts).size).toBe(3)
    expect(b.choices.map((c) => c.message.content)).toEqual(texts)
    const tokens = a.choices.reduce((n, c) => n + (c.logprobs?.content?.length ?? 0), 0)
    expect(a.usage?.completion_tokens).toBe(tokens)
    expect(a.usage?.total_tokens).toBe((a.usage?.prompt_tokens ?? 0) + tokens)
  }, 300_000)

  it('completions: logprobs N gives tokens, token_logprobs and top_logprobs of N', async () => {
    const res = await client.completions.create({ model: NAME, prompt: 'Once', max_tokens: 4, logprobs: 2, seed: 3 })
    const lp = res.choices[0].logprobs
    expect(lp?.tokens?.join('')).toBe(res.choices[0].text)
    expect(lp?.token_logprobs).toHaveLength(res.usage?.completion_tokens ?? -1)
    for (const top of lp?.top_logprobs ?? []) expect(Object.keys(top).length).toBeLessThanOrEqual(2)
  }, 300_000)

  it('refuses what it cannot enforce in OpenAI’s error shape', async () => {
    const bad = client.chat.completions.create({
      model: NAME,
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', pattern: '^a+$' } } }
    })
    await expect(bad).rejects.toMatchObject({
      status: 400,
      code: 'unsupported_schema',
      param: 'response_format.json_schema.schema'
    })
  })
})
