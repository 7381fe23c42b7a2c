import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_SPECULATE } from '../../client/options.js'
import { type RunningApi, runApi } from '../../node/cli/commands/api.js'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { createLogger } from '../../node/log.js'
import { errorCode } from '../../shards/index.js'
import {
  openAiGatewayOptions as apiOptions,
  type OpenAiGatewaySwarm,
  rejection,
  startOpenAiGatewaySwarm
} from '../helpers/openai-gateway.js'
import { loadReference } from '../helpers/reference.js'

const KEY = 'test-key-0123456789'
const MODEL = 'stories260K'
const ref = loadReference('stories260K_greedy_once_upon_a_time')

describe('OpenAI-compatible gateway on a 2-process swarm, driven by the openai client', () => {
  let swarm: OpenAiGatewaySwarm
  let nodes: LocalNode[]
  let open: RunningApi
  let locked: RunningApi
  let client: OpenAI
  let greedyText: string

  beforeAll(async () => {
    swarm = await startOpenAiGatewaySwarm(ref, KEY)
    ;({ nodes, open, locked, client, greedyText } = swarm)
  }, 120_000)

  afterAll(async () => {
    await swarm?.close()
  })

  it('lists the model', async () => {
    const list = await client.models.list()
    expect(list.data.map((m) => m.id)).toEqual([MODEL])
    // issue 33 item 5: with a name a person can read, from the GGUF metadata
    expect((list.data[0] as unknown as { layerswarm: { name: string } }).layerswarm.name).toMatch(/^llama \d+K F32$/)
  })

  it("completes greedily with llama2.c's tokens, usage and the verification report", async () => {
    const { data, response } = await client.completions
      .create({ model: MODEL, prompt: ref.prompt, max_tokens: 24, temperature: 0 })
      .withResponse()
    expect(data.object).toBe('text_completion')
    expect(data.choices[0].text).toBe(greedyText)
    expect(data.choices[0].finish_reason).toBe('length')
    expect(data.usage).toEqual({
      prompt_tokens: ref.prompt_tokens.length,
      completion_tokens: 24,
      total_tokens: ref.prompt_tokens.length + 24
    })
    const report = (
      data as unknown as {
        layerswarm: {
          route: Array<{ peer_id: string; start: number; end: number }>
          report: { receipts: { checked: number; invalid: number } }
        }
      }
    ).layerswarm
    expect(report.route[0].start).toBe(1)
    expect(report.route[report.route.length - 1].end).toBe(4)
    expect(nodes.map((n) => n.peerId)).toEqual(expect.arrayContaining(report.route.map((h) => h.peer_id)))
    expect(report.report.receipts.checked).toBeGreaterThan(0)
    expect(report.report.receipts.invalid).toBe(0)
    expect(response.headers.get('x-layerswarm-verification')).toMatch(
      /^route=.+; receipts=\d+\/\d+; canaries=.+; failovers=0; excluded=0$/
    )
  })

  it('streams the same completion as server-sent events, with the report in the last chunk', async () => {
    const stream = await client.completions.create({
      model: MODEL,
      prompt: ref.prompt,
      max_tokens: 24,
      temperature: 0,
      stream: true
    })
    const chunks = []
    for await (const c of stream) chunks.push(c)
    expect(chunks.length).toBeGreaterThan(2)
    expect(chunks.map((c) => c.choices[0]?.text ?? '').join('')).toBe(greedyText)
    const last = chunks[chunks.length - 1] as unknown as {
      choices: Array<{ finish_reason: string }>
      usage: { completion_tokens: number }
      layerswarm: { route: unknown[] }
    }
    expect(last.choices[0].finish_reason).toBe('length')
    expect(last.usage.completion_tokens).toBe(24)
    expect(last.layerswarm.route.length).toBeGreaterThan(0)
  })

  it('cuts the text at a stop sequence (string or array), streaming or not', async () => {
    const word = greedyText.trim().split(/\s+/)[3]
    const cut = greedyText.slice(0, greedyText.indexOf(word))
    const whole = await client.completions.create({
      model: MODEL,
      prompt: ref.prompt,
      max_tokens: 24,
      temperature: 0,
      stop: word
    })
    expect(whole.choices[0].text).toBe(cut)
    expect(whole.choices[0].finish_reason).toBe('stop')
    const stream = await client.completions.create({
      model: MODEL,
      prompt: ref.prompt,
      max_tokens: 24,
      temperature: 0,
      stop: ['zzz', word],
      stream: true
    })
    let text = ''
    for await (const c of stream) text += c.choices[0]?.text ?? ''
    expect(text).toBe(cut)
  })

  it('samples reproducibly with a seed, temperature and top_p', async () => {
    const ask = () =>
      client.completions.create({ model: MODEL, prompt: 'Lily saw a', max_tokens: 16, temperature: 0.9, top_p: 0.9, seed: 7 })
    const [a, b] = [await ask(), await ask()]
    expect(a.choices[0].text).toBe(b.choices[0].text)
    expect(a.choices[0].text.length).toBeGreaterThan(0)
  })

  it('chats through the plain format, streaming and not', async () => {
    const messages = [
      { role: 'system' as const, content: 'You tell short stories.' },
      { role: 'user' as const, content: 'Tell me about a cat.' }
    ]
    const whole = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 20, temperature: 0 })
    expect(whole.object).toBe('chat.completion')
    expect(whole.choices[0].message.role).toBe('assistant')
    expect(whole.usage!.completion_tokens).toBeGreaterThan(0)
    expect(whole.usage!.completion_tokens).toBeLessThanOrEqual(20)
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 20,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true }
    })
    let text = ''
    let usage: OpenAI.CompletionUsage | undefined | null
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? ''
      usage = c.usage ?? usage
    }
    expect(text).toBe(whole.choices[0].message.content)
    expect(usage?.total_tokens).toBe(whole.usage!.total_tokens)
  })

  it('answers bad requests with OpenAI-style errors and status codes', async () => {
    const bad = async (p: Promise<unknown>) => {
      const err = await rejection(p)
      expect(err).toBeInstanceOf(OpenAI.APIError)
      return err as InstanceType<typeof OpenAI.APIError>
    }
    const n2 = await bad(client.completions.create({ model: MODEL, prompt: 'x', n: 0 }))
    expect([n2.status, n2.param, n2.type]).toEqual([400, 'n', 'invalid_request_error'])
    const temp = await bad(client.completions.create({ model: MODEL, prompt: 'x', temperature: 5 }))
    expect([temp.status, temp.param]).toEqual([400, 'temperature'])
    const noModel = await bad(client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }))
    expect([noModel.status, noModel.code]).toEqual([404, 'model_not_found'])
    const noMessages = await bad(client.chat.completions.create({ model: MODEL, messages: [] }))
    expect([noMessages.status, noMessages.param]).toEqual([400, 'messages'])
    const long = await bad(client.completions.create({ model: MODEL, prompt: 'Once upon a time '.repeat(200) }))
    expect([long.status, long.code]).toEqual([400, 'context_length_exceeded'])

    const raw = (path: string, init?: RequestInit) => fetch(`${open.gateway.url}${path}`, init)
    const unknown = await raw('/v1/embeddings', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    expect(unknown.status).toBe(404)
    expect(((await unknown.json()) as { error: unknown }).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'unknown_url'
    })
    const wrongMethod = await raw('/v1/completions')
    expect(wrongMethod.status).toBe(405)
    expect(wrongMethod.headers.get('allow')).toBe('POST')
    const badJson = await raw('/v1/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model":'
    })
    expect(badJson.status).toBe(400)
    expect(((await badJson.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error')
    const huge = await raw('/v1/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: 'x'.repeat(2 << 20) })
    })
    expect(huge.status).toBe(413)
  })

  it('takes speculation per request (layerswarm.speculate): same greedy text, the report says which drafter ran', async () => {
    const post = async (body: Record<string, unknown>) => {
      const res = await fetch(`${open.gateway.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: ref.prompt, max_tokens: 24, temperature: 0, ...body })
      })
      return { status: res.status, json: (await res.json()) as Record<string, any> }
    }
    // the gateway's default (ngram, client/options.ts), and off for one request
    const byDefault = await post({})
    const off = await post({ layerswarm: { speculate: 'off' } })
    const ngram = await post({ layerswarm: { speculate: 'ngram' } })
    for (const r of [byDefault, off, ngram]) {
      expect(r.status).toBe(200)
      expect(r.json.choices[0].text).toBe(greedyText)
    }
    expect(byDefault.json.layerswarm.speculation.mode).toBe(DEFAULT_SPECULATE)
    expect(off.json.layerswarm.speculation).toEqual({ mode: 'off', steps: 0, drafted: 0, accepted: 0 })
    expect(ngram.json.layerswarm.speculation.mode).toBe('ngram')
    expect(ngram.json.layerswarm.speculation.drafted).toBeGreaterThan(0)
    // a request cannot name a file on the gateway's host; `draft` needs the gateway's draft model
    for (const [layerswarm, code] of [
      [{ speculate: 'draft:/etc/passwd' }, 'invalid_value'],
      [{ speculate: 'draft' }, 'unsupported_value'],
      [{ speculate: 3 }, 'invalid_value'],
      [{ speculat: 'off' }, 'unknown_parameter'],
      ['off', 'invalid_type']
    ] as const) {
      const bad = await post({ layerswarm })
      expect(bad.status).toBe(400)
      expect(bad.json.error).toMatchObject({ type: 'invalid_request_error', code })
      expect(String(bad.json.error.param)).toMatch(/^layerswarm/)
    }
  })

  it('answers 429 busy beyond --max-concurrent', async () => {
    const busy = await runApi(apiOptions({ bootstrap: nodes[0].addrs[0], maxConcurrent: 1 }), createLogger({ level: 'silent' }))
    try {
      const c = new OpenAI({ baseURL: `${busy.gateway.url}/v1`, apiKey: 'unused', maxRetries: 0 })
      const first = await c.completions.create({
        model: MODEL,
        prompt: ref.prompt,
        max_tokens: 400,
        temperature: 0,
        stream: true
      })
      const it = first[Symbol.asyncIterator]()
      await it.next() // the first generation is running now
      const err = await rejection(c.completions.create({ model: MODEL, prompt: 'x', max_tokens: 2 }))
      expect(err).toBeInstanceOf(OpenAI.RateLimitError)
      expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('busy')
      first.controller.abort()
      // The hang-up frees the swarm session (and the slot) promptly.
      await expect.poll(() => busy.gateway.stats.active, { timeout: 15_000 }).toBe(0)
    } finally {
      await busy.close()
    }
  })

  it('requires the bearer key when started with --api-key', async () => {
    const url = `${locked.gateway.url}/v1`
    const none = new OpenAI({ baseURL: url, apiKey: 'unused', maxRetries: 0, defaultHeaders: { authorization: null } })
    const missing = await rejection(none.models.list())
    expect(missing).toBeInstanceOf(OpenAI.AuthenticationError)
    expect((missing as InstanceType<typeof OpenAI.APIError>).code).toBe('invalid_api_key')
    const wrongKey = new OpenAI({ baseURL: url, apiKey: 'wrong-key-000000', maxRetries: 0 })
    const wrong = await rejection(wrongKey.completions.create({ model: MODEL, prompt: 'x' }))
    expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError)
    const right = new OpenAI({ baseURL: url, apiKey: KEY, maxRetries: 0 })
    expect((await right.models.list()).data[0].id).toBe(MODEL)
    const done = await right.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4,
      temperature: 0
    })
    expect(done.usage!.completion_tokens).toBeGreaterThan(0)
    expect((await fetch(`${locked.gateway.url}/status.json`)).status).toBe(401)
    expect((await fetch(`${locked.gateway.url}/status.json`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200)
    // The page itself holds no data; it asks for the key in the browser.
    expect((await fetch(`${locked.gateway.url}/`)).status).toBe(200)
  })

  it('refuses a non-loopback address without a key', async () => {
    const err = await rejection(runApi(apiOptions({ bootstrap: nodes[0].addrs[0], listen: '0.0.0.0:0' })))
    expect(errorCode(err)).toBe('INSECURE_LISTEN')
  })

  it('exposes Prometheus metrics with --metrics', async () => {
    const text = await (await fetch(open.metrics!.url)).text()
    expect(text).toMatch(/layerswarm_tokens_total\{phase="decode",role="gateway"\} [1-9]/)
    expect(text).toContain('layerswarm_step_duration_seconds_bucket')
    expect(text).toMatch(/layerswarm_sessions_total\{role="gateway"\} [1-9]/)
  })
})
