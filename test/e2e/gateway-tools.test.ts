import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { Ajv } from 'ajv'
import OpenAI from 'openai'
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { parseShape, writeRandomModel } from '../../shards/index.js'
import { loadPackageVocabulary } from '../../shards/tokenizers/vocab-packages.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { writeQwenVocabModel } from '../helpers/qwen-vocab-model.js'

// Issue 37: a two-turn tool conversation (call, result, answer), streamed and not, through the
// official openai and @anthropic-ai/sdk clients, with each family's template: Qwen 3's own
// (tools in <tools>, calls in <tool_call>) and Llama 3's (the gateway writes Llama 3.1's JSON
// tool prompt). Random weights: the named/required call is constrained, so it always parses.

const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const KEY = 'tools-key-0123456789'
const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 10 }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false
}
const TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: WEATHER } },
  {
    type: 'function',
    function: {
      name: 'get_time',
      parameters: { type: 'object', properties: { zone: { type: 'integer' } }, required: ['zone'], additionalProperties: false }
    }
  }
]
const validWeather = new Ajv().compile(WEATHER)

function writeModel(family: 'qwen' | 'llama3', path: string): void {
  if (family === 'qwen') {
    writeQwenVocabModel(path, { layers: 4, seed: 5, seqLen: 512 })
    return
  }
  const v = loadPackageVocabulary('llama3')
  writeRandomModel(
    path,
    { ...parseShape('64,4,4,2,128,300,tied'), vocabSize: v.tokens.length },
    {
      dtype: 'f16',
      seed: 5,
      seqLen: 512,
      tokenizerMetadata: v.metadata
    }
  )
}

describe.each(['qwen', 'llama3'] as const)('tool calls with the %s template', (family) => {
  const dir = mkdtempSync(join(tmpdir(), `layerswarm-gw-tools-${family}-`))
  const model = join(dir, `${family}-tools.gguf`)
  const NAME = `${family}-tools`
  const nodes: LocalNode[] = []
  let api: RunningApi
  let client: OpenAI

  beforeAll(async () => {
    writeModel(family, model)
    nodes.push(await startLocalNode({ model, layers: '0:3', args: FAST, startTimeoutMs: 90_000 }))
    nodes.push(await startLocalNode({ model, layers: '2:4', bootstrap: [nodes[0].addrs[0]], args: FAST, startTimeoutMs: 90_000 }))
    api = await startGatewayApi({ model, bootstrap: nodes[0].addrs[0], routeTimeout: 60_000, apiKey: KEY })
    client = new OpenAI({ baseURL: `${api.gateway.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 300_000 })
  }, 240_000)

  afterAll(async () => {
    await api?.close()
    await Promise.all(nodes.map((n) => n.stop()))
    rmSync(dir, { recursive: true, force: true })
  })

  const first: ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }]
  const secondTurn = (call: { id: string; function: { name: string; arguments: string } }): ChatCompletionMessageParam[] => [
    ...first,
    { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: call.function }] },
    { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21, "sky": "clear"}' }
  ]

  it('two turns, not streamed: a named call whose arguments match its schema, then an answer', async () => {
    const one = await client.chat.completions.create({
      model: NAME,
      messages: first,
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 64,
      seed: 1
    })
    const call = one.choices[0].message.tool_calls?.[0]
    expect(one.choices[0].finish_reason).toBe('tool_calls')
    expect(call?.type === 'function' && call.function.name).toBe('get_weather')
    if (call?.type !== 'function') throw new Error('no function call')
    expect(validWeather(JSON.parse(call.function.arguments))).toBe(true)
    expect((one as unknown as { layerswarm?: { model_id: string } }).layerswarm?.model_id).toBeTypeOf('string')
    const two = await client.chat.completions.create({
      model: NAME,
      messages: secondTurn(call),
      tools: TOOLS,
      max_tokens: 6,
      seed: 2
    })
    expect(two.choices[0].message.role).toBe('assistant')
    // the tool's result is in the prompt: the second turn's prompt holds the first and the result
    expect(two.usage?.prompt_tokens ?? 0).toBeGreaterThan((one.usage?.prompt_tokens ?? 0) + 10)
  }, 300_000)

  it('two turns, streamed: tool_call deltas build the same kind of call (required, parallel off)', async () => {
    const stream = client.chat.completions.stream({
      model: NAME,
      messages: first,
      tools: TOOLS,
      tool_choice: 'required',
      parallel_tool_calls: false,
      max_tokens: 64,
      seed: 3
    })
    const done = await stream.finalChatCompletion()
    const call = done.choices[0].message.tool_calls?.[0]
    expect(done.choices[0].finish_reason).toBe('tool_calls')
    if (call?.type !== 'function') throw new Error('no function call')
    expect(['get_weather', 'get_time']).toContain(call.function.name)
    expect(typeof JSON.parse(call.function.arguments)).toBe('object')
    const again = client.chat.completions.stream({
      model: NAME,
      messages: secondTurn(call),
      tools: TOOLS,
      max_tokens: 6,
      seed: 4
    })
    const answer = await again.finalChatCompletion()
    expect(answer.choices[0].message.role).toBe('assistant')
    expect(answer.usage?.completion_tokens).toBeGreaterThan(0)
  }, 300_000)

  it('the Anthropic Messages API: tool_use, then tool_result, streamed and not (x-api-key)', async () => {
    const anthropic = new Anthropic({ baseURL: api.gateway.url, apiKey: KEY, maxRetries: 0 })
    const tools = [{ name: 'get_weather', description: 'Weather in a city', input_schema: WEATHER as Anthropic.Tool.InputSchema }]
    const one = await anthropic.messages.create({
      model: NAME,
      max_tokens: 64,
      system: 'You are terse.',
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      tools,
      tool_choice: { type: 'tool', name: 'get_weather' }
    })
    expect(one.stop_reason).toBe('tool_use')
    const use = one.content.find((b) => b.type === 'tool_use')
    if (use?.type !== 'tool_use') throw new Error('no tool_use block')
    expect(validWeather(use.input)).toBe(true)
    const stream = anthropic.messages.stream({
      model: NAME,
      max_tokens: 6,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: one.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '12 degrees' }] }
      ],
      tools
    })
    const two = await stream.finalMessage()
    expect(two.role).toBe('assistant')
    expect(two.usage.output_tokens).toBeGreaterThan(0)
    expect(two.usage.input_tokens).toBeGreaterThan(one.usage.input_tokens)
    const streamedCall = await anthropic.messages
      .stream({
        model: NAME,
        max_tokens: 64,
        messages: [{ role: 'user', content: 'Oslo?' }],
        tools,
        tool_choice: { type: 'any' }
      })
      .finalMessage()
    const streamedUse = streamedCall.content.find((b) => b.type === 'tool_use')
    expect(streamedUse?.type === 'tool_use' && validWeather(streamedUse.input)).toBe(true)
    const noKey = new Anthropic({ baseURL: api.gateway.url, apiKey: 'wrong-key-000000', maxRetries: 0 })
    await expect(
      noKey.messages.create({ model: NAME, max_tokens: 2, messages: [{ role: 'user', content: 'x' }] })
    ).rejects.toMatchObject({
      status: 401
    })
  }, 300_000)
})
