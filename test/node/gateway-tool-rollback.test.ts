import Fastify from 'fastify'
import { describe, expect, it } from 'vitest'
import type { LayerswarmClient } from '../../client/index.js'
import { registerAnthropicRoutes } from '../../node/gateway/anthropic-routes.js'
import { registerChatRoute } from '../../node/gateway/chat-route.js'
import { createChatFormatter } from '../../node/gateway/chat-template.js'
import type { GatewayContext } from '../../node/gateway/generation.js'
import { LiveStats } from '../../node/gateway/live-stats.js'
import { parseToolCalls } from '../../node/gateway/tools/tools-format.js'
import { createLogger } from '../../node/log.js'

// Issue 37 ("a rollback after a conviction still replaces streamed text correctly for tool-call
// deltas"): the SDK's stream is scripted here (a conviction's rollback at a chosen point, what
// client/session/verified-stream.ts yields) so the case happens every run; the real swarm's
// rollbacks are test/e2e/rollback.test.ts. The gateway's own stream handling is what runs.

type Ev = { type: 'token'; text: string } | { type: 'rollback'; textOffset: number; text: string }

function scriptedContext(script: Ev[]): GatewayContext {
  const report = { rollbacks: [], canaries: [], routes: [], failovers: 0, receipts: { checked: 0, invalid: 0 }, evidence: [] }
  const client = {
    modelId: 'scripted',
    tokenizer: { encode: (s: string) => Array.from(s, () => 1), stopIds: [2], eosId: 2 },
    async *stream() {
      let tokens = 0
      for (const ev of script) {
        if (ev.type === 'token') {
          tokens++
          yield { type: 'token', token: 1, text: ev.text }
        } else
          yield { type: 'rollback', position: 1, textOffset: ev.textOffset, tokens: [1], text: ev.text, convicted: ['peerX'] }
      }
      return {
        tokens: Array(tokens).fill(1),
        promptTokens: [1, 1],
        report,
        convicted: ['peerX'],
        speculation: { steps: 0, drafted: 0, accepted: 0 }
      }
    }
  } as unknown as LayerswarmClient
  return {
    client,
    stats: new LiveStats(),
    log: createLogger({ level: process.env.DBG ? 'debug' : 'silent' }),
    maxConcurrent: 4,
    contextLength: 4096
  }
}

interface Aware {
  content: string
  calls: Array<{ id: string; name: string; arguments: string }>
}

/** What a layerswarm-aware client holds after the stream (docs/gateway.md, Rollback). */
function applySse(body: string): Aware {
  const seen: Aware = { content: '', calls: [] }
  for (const block of body.split('\n\n')) {
    const data = block
      .split('\n')
      .find((l) => l.startsWith('data: '))
      ?.slice(6)
    if (!data || data === '[DONE]') continue
    const c = JSON.parse(data)
    if (c.object === 'layerswarm.rollback') {
      const r = c.layerswarm
      seen.content = seen.content.slice(0, r.offset) + r.text
      seen.calls = seen.calls.slice(0, r.tool_calls ?? seen.calls.length)
      continue
    }
    if (c.error) throw new Error(JSON.stringify(c.error))
    const d = c.choices[0]?.delta ?? {}
    seen.content += d.content ?? ''
    for (const t of d.tool_calls ?? []) {
      if (t.id) seen.calls[t.index] = { id: t.id, name: t.function.name, arguments: '' }
      else seen.calls[t.index].arguments += t.function.arguments
    }
  }
  return seen
}

async function streamChat(script: Ev[]): Promise<Aware> {
  const app = Fastify({ logger: Boolean(process.env.DBG) })
  registerChatRoute(app, scriptedContext(script), ['m'], createChatFormatter({ bosToken: '<s>', eosToken: '</s>' }))
  const res = await app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    payload: {
      model: 'm',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }]
    }
  })
  await app.close()
  expect(res.statusCode, res.body).toBe(200)
  return applySse(res.body)
}

const call = (name: string, args: string) => `<tool_call>\n{"name": "${name}", "arguments": ${args}}\n</tool_call>`

describe('gateway: a rollback mid-stream with tool calls', () => {
  it('a void call that went out is withdrawn, the honest call replaces it, and held text does not leak', async () => {
    const honest = `Hi ${call('g', '{"b": 2}')} bye`
    const seen = await streamChat([
      { type: 'token', text: 'Hi ' },
      { type: 'token', text: call('f', '{"a": 1}') },
      { type: 'token', text: ' then <tool_' },
      { type: 'rollback', textOffset: 3, text: call('g', '{"b": 2}') },
      { type: 'token', text: ' bye' }
    ])
    const want = parseToolCalls('hermes', honest)
    expect(seen.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['g', { b: 2 }]])
    expect(seen.content).toBe('Hi  bye')
    expect(want.content).toBe('Hi  bye')
  })

  it('a rollback inside a call still held: no half call, the kept call stays', async () => {
    const seen = await streamChat([
      { type: 'token', text: call('f', '{"a": 1}') },
      { type: 'token', text: '<tool_call>\n{"name": "f", "arguments": {"a": 9' },
      { type: 'rollback', textOffset: call('f', '{"a": 1}').length + 12, text: '{"name": "g", "arguments": {"c": 3}}' },
      { type: 'token', text: '\n</tool_call>' }
    ])
    expect(seen.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ['f', { a: 1 }],
      ['g', { c: 3 }]
    ])
    expect(seen.content).toBe('')
  })
})

/** Text (over text blocks) and tool_use blocks, as a layerswarm-aware Messages client holds them. */
function applyAnthropic(body: string): Aware {
  const seen: Aware = { content: '', calls: [] }
  for (const block of body.split('\n\n')) {
    const data = block
      .split('\n')
      .find((l) => l.startsWith('data: '))
      ?.slice(6)
    if (!data) continue
    const e = JSON.parse(data)
    if (e.type === 'error') throw new Error(JSON.stringify(e))
    if (e.type === 'layerswarm.rollback') {
      seen.content = seen.content.slice(0, e.offset) + e.text
      seen.calls = seen.calls.slice(0, e.tool_calls ?? seen.calls.length)
    } else if (e.type === 'content_block_start' && e.content_block.type === 'tool_use')
      seen.calls.push({ id: e.content_block.id, name: e.content_block.name, arguments: '' })
    else if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') seen.content += e.delta.text
    else if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta')
      seen.calls[seen.calls.length - 1].arguments += e.delta.partial_json
  }
  return seen
}

describe('gateway /v1/messages: a rollback mid-stream with tool calls', () => {
  it('the void tool_use is withdrawn and the honest one follows', async () => {
    const app = Fastify()
    const script: Ev[] = [
      { type: 'token', text: 'Hi ' },
      { type: 'token', text: call('f', '{"a": 1}') },
      { type: 'token', text: ' then <tool_' },
      { type: 'rollback', textOffset: 3, text: call('g', '{"b": 2}') },
      { type: 'token', text: ' bye' }
    ]
    registerAnthropicRoutes(app, scriptedContext(script), ['m'], createChatFormatter({ bosToken: '<s>', eosToken: '</s>' }))
    const res = await app.inject({
      method: 'POST',
      url: '/v1/messages',
      payload: {
        model: 'm',
        max_tokens: 64,
        stream: true,
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ name: 'f', input_schema: { type: 'object' } }]
      }
    })
    await app.close()
    expect(res.statusCode, res.body).toBe(200)
    const seen = applyAnthropic(res.body)
    expect(seen.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['g', { b: 2 }]])
    expect(seen.content).toBe('Hi  bye')
  })
})
