import { Ajv } from 'ajv'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { GGUF_PATH } from '../helpers/reference.js'

/*
 * Issue 37 item 5 through real peers: a peer tampering with every step serves [1,4) and is a
 * fresh client's first choice (test/e2e/rollback.test.ts's swarm), so a gateway's streamed tool
 * call or JSON-schema output is computed through it and the SDK recomputes through the honest
 * peers. A layerswarm-aware client that applies the rollback events must hold exactly what the
 * non-streamed (honest) response holds: one whole call / valid JSON, no void part. Whether a
 * rollback lands after text went out depends on when the conviction comes (the count is logged;
 * in this session's runs none did); test/node/gateway-tool-rollback.test.ts pins that case down
 * with a scripted stream. A tamperer from a late position (--tamper-after) once flipped a
 * constrained `true`/`false` unconvicted at canary rate 0.03: a detection-rate question.
 */
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const SCHEMA = {
  type: 'object',
  properties: { ok: { type: 'boolean' } },
  required: ['ok'],
  additionalProperties: false
}
const valid = new Ajv().compile(SCHEMA)

interface Seen {
  content: string
  calls: Array<{ name: string; arguments: string }>
  rollbacks: number
  /** Peers the final report names convicted. */
  convicted?: string[]
}

interface Chunk {
  object: string
  layerswarm?: { offset: number; text: string; tool_calls?: number }
  choices: Array<{
    delta?: {
      content?: string | null
      tool_calls?: Array<{ index: number; id?: string; function: { name?: string; arguments: string } }>
    }
  }>
}

async function streamed(client: OpenAI, body: Record<string, unknown>): Promise<Seen> {
  const seen: Seen = { content: '', calls: [], rollbacks: 0 }
  const stream = (await client.chat.completions.create({ ...body, stream: true } as never)) as unknown as AsyncIterable<Chunk>
  for await (const c of stream) {
    if (c.object === 'layerswarm.rollback' && c.layerswarm) {
      const r = c.layerswarm
      seen.rollbacks++
      seen.content = seen.content.slice(0, r.offset) + r.text
      seen.calls = seen.calls.slice(0, r.tool_calls ?? seen.calls.length)
      continue
    }
    if (c.layerswarm && 'convicted' in c.layerswarm) seen.convicted = (c.layerswarm as { convicted: string[] }).convicted
    const d = c.choices[0]?.delta ?? {}
    seen.content += d.content ?? ''
    for (const t of d.tool_calls ?? []) {
      if (t.id) seen.calls[t.index] = { name: t.function.name ?? '', arguments: '' }
      else seen.calls[t.index].arguments += t.function.arguments
    }
  }
  return seen
}

const base = {
  model: 'stories260K',
  temperature: 0,
  seed: 7,
  max_tokens: 96,
  messages: [{ role: 'user' as const, content: 'Once' }]
}
const TOOLS = [{ type: 'function' as const, function: { name: 'find', parameters: SCHEMA } }]

describe('gateway rollback with a tampering peer: tool calls and JSON schema stay whole', () => {
  const nodes: LocalNode[] = []
  let bootstrap: string
  let rollbacks = 0

  beforeAll(async () => {
    const tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--tamper', 'noise', '--tamper-size', '0.5', '--tamper-rate', '1']
    })
    nodes.push(tamperer)
    const first = [tamperer.addrs[0]]
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:3', bootstrap: first, args: FAST }))
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap: first, args: FAST }))
    bootstrap = nodes.map((n) => n.addrs[0]).join(',')
  }, 180_000)

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
    console.log(`gateway-rollback-tools: ${rollbacks} rollback events seen`)
  })

  /** One request on a fresh gateway (a fresh client: the tamperer is its first choice again). */
  async function fresh<T>(run: (client: OpenAI) => Promise<T>): Promise<T> {
    const api = await startGatewayApi({ bootstrap, model: GGUF_PATH, canaryRate: 0.03 })
    try {
      await api.gateway.client.view.waitForRoute(1, 4, 60_000)
      return await run(new OpenAI({ baseURL: `${api.gateway.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 300_000 }))
    } finally {
      await api.close()
    }
  }

  it('a named tool call: streamed (rollbacks applied) equals the honest call', { timeout: 600_000 }, async () => {
    const body = {
      ...base,
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'find' } }
    }
    const whole = await fresh((c) => c.chat.completions.create(body as never))
    const message = (
      whole as { choices: Array<{ message: { tool_calls?: Array<{ function: { name: string; arguments: string } }> } }> }
    ).choices[0].message
    expect(message.tool_calls, JSON.stringify(message)).toHaveLength(1)
    const call = message.tool_calls![0].function
    expect(valid(JSON.parse(call.arguments))).toBe(true)
    const seen = await fresh((c) => streamed(c, body))
    rollbacks += seen.rollbacks
    console.log(`tool call: ${seen.rollbacks} rollbacks, convicted ${JSON.stringify(seen.convicted)}`)
    expect(seen.calls).toEqual([{ name: 'find', arguments: call.arguments }])
    expect(seen.content).toBe('')
  })

  it('json_schema: streamed (rollbacks applied) is the honest JSON', { timeout: 600_000 }, async () => {
    const body = {
      ...base,
      response_format: { type: 'json_schema', json_schema: { name: 'x', strict: true, schema: SCHEMA } }
    }
    const whole = await fresh((c) => c.chat.completions.create(body as never))
    const text = (whole as { choices: Array<{ message: { content: string } }> }).choices[0].message.content
    expect(valid(JSON.parse(text))).toBe(true)
    const seen = await fresh((c) => streamed(c, body))
    rollbacks += seen.rollbacks
    console.log(`json: ${seen.rollbacks} rollbacks, convicted ${JSON.stringify(seen.convicted)}`)
    expect(seen.content).toBe(text)
    expect(seen.calls).toEqual([])
  })
})
