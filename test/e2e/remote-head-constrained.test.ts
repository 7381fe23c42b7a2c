import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type GenerateResult } from '../../client/index.js'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels, type TokenLogprobs } from '../../shards/index.js'
import { cliAsync } from '../helpers/cli-async.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue #35, session 4: grammars, JSON schemas and logprobs with the head on a peer, end to end.
// Node processes on 127.0.0.1 serve blocks [1,3) and [3,5) of the bundled model; the peer of
// [3,5) runs the head. A constrained greedy completion through `head: 'remote'` (SDK) and
// `api --head remote` (gateway, official response_format and logprobs fields) equals the one
// the local head gives over the same swarm, token for token, with the same log-probabilities; a
// sampled constrained completion validates against its schema and checks the head peer.

const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const PROMPT = 'Once upon a time'
const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer' },
    happy: { type: 'boolean' }
  },
  required: ['name', 'age', 'happy'],
  additionalProperties: false
}

interface Sampled {
  result: GenerateResult
  logprobs: TokenLogprobs[]
}

describe('grammars and logprobs with the head on a peer (node processes on 127.0.0.1)', () => {
  const nodes: LocalNode[] = []
  let bootstrap: string[]
  const valid = new Ajv().compile(SCHEMA)

  beforeAll(async () => {
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: FAST }))
    bootstrap = [nodes[0].addrs[0]]
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '3:5', bootstrap, args: FAST }))
  }, 60_000)

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  async function run(head: 'local' | 'remote', o: { temperature: number; seed?: number; schema?: object }): Promise<Sampled> {
    const client = await createClient({
      bootstrap,
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      head,
      edgeLast: 0,
      // the local head then sees the hidden state the head peer computes on, in f32
      wireDtype: 'f32',
      canaries: false,
      routeTimeoutMs: 20_000
    })
    const logprobs: TokenLogprobs[] = []
    try {
      const result = await client.generate(PROMPT, {
        maxTokens: 48,
        temperature: o.temperature,
        seed: o.seed,
        ...(o.schema ? { schema: o.schema } : {}),
        topLogprobs: 3,
        onSampled: (_t, _p, lp) => {
          if (lp) logprobs.push(lp)
        }
      })
      return { result, logprobs }
    } finally {
      await client.close()
    }
  }

  function expectSameLogprobs(a: TokenLogprobs[], b: TokenLogprobs[]): void {
    expect(a.length).toBe(b.length)
    for (let i = 0; i < a.length; i++) {
      expect(a[i].token).toBe(b[i].token)
      expect(a[i].logprob).toBeCloseTo(b[i].logprob, 5)
      expect(a[i].top.map((t) => t.token)).toEqual(b[i].top.map((t) => t.token))
      for (let j = 0; j < a[i].top.length; j++) expect(a[i].top[j].logprob).toBeCloseTo(b[i].top[j].logprob, 5)
    }
  }

  it('SDK, JSON schema, greedy: the local head’s tokens and logprobs; the JSON validates', { timeout: 90_000 }, async () => {
    const local = await run('local', { temperature: 0, schema: SCHEMA })
    const remote = await run('remote', { temperature: 0, schema: SCHEMA })
    expect(valid(JSON.parse(local.result.text))).toBe(true)
    expect(remote.result.tokens).toEqual(local.result.tokens)
    expect(remote.result.text).toBe(local.result.text)
    expectSameLogprobs(remote.logprobs, local.logprobs)
    // the grammar refuses the model's likeliest tokens at most steps: those asked the full row
    expect(remote.result.head?.fallbacks).toBeGreaterThan(0)
    expect(remote.result.head?.violations).toBe(0)
  })

  it('SDK, logprobs without a grammar, greedy: the local head’s', { timeout: 90_000 }, async () => {
    const local = await run('local', { temperature: 0 })
    const remote = await run('remote', { temperature: 0 })
    expect(remote.result.tokens).toEqual(local.result.tokens)
    expectSameLogprobs(remote.logprobs, local.logprobs)
    expect(remote.logprobs.length).toBe(remote.result.tokens.length + (remote.result.tokens.length < 48 ? 1 : 0))
  })

  it('SDK, JSON schema, sampled (3 seeds): valid JSON, logprobs of the sampled tokens, the head checked', {
    timeout: 120_000
  }, async () => {
    for (const seed of [1, 2, 3]) {
      const r = await run('remote', { temperature: 0.9, seed, schema: SCHEMA })
      expect(valid(JSON.parse(r.result.text)), r.result.text).toBe(true)
      for (let i = 0; i < r.result.tokens.length; i++) expect(r.logprobs[i].token).toBe(r.result.tokens[i])
      expect(r.result.head?.violations).toBe(0)
    }
  })

  it('layerswarm generate --head remote --json-schema: the SDK’s local-head tokens', { timeout: 90_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'head-schema-'))
    try {
      writeFileSync(join(dir, 'schema.json'), JSON.stringify(SCHEMA))
      const cli = await cliAsync([
        'generate',
        '--bootstrap',
        bootstrap.join(','),
        '--model',
        GGUF_PATH,
        '--prompt',
        PROMPT,
        '--max-tokens',
        '48',
        '--temperature',
        '0',
        '--head',
        'remote',
        '--json-schema',
        join(dir, 'schema.json'),
        '--canary-rate',
        '0',
        '--json'
      ])
      expect(cli.status, cli.stderr).toBe(0)
      const out = JSON.parse(cli.stdout) as { tokens: number[]; head: { steps: number } }
      expect(out.tokens).toEqual((await run('local', { temperature: 0, schema: SCHEMA })).result.tokens)
      expect(out.head.steps).toBeGreaterThan(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('gateway (api --head remote): response_format json_schema and logprobs equal the local head’s gateway', {
    timeout: 150_000
  }, async () => {
    const body = {
      model: 'stories260K',
      messages: [{ role: 'user', content: 'A person as JSON' }],
      max_tokens: 48,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: SCHEMA } }
    }
    const ask = async (head: 'local' | 'remote'): Promise<Record<string, unknown>> => {
      let api: RunningApi | undefined
      try {
        api = await startGatewayApi({ model: GGUF_PATH, bootstrap: bootstrap[0], head, edgeLast: 0 })
        const res = await fetch(`${api.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body)
        })
        expect(res.status).toBe(200)
        return (await res.json()) as Record<string, unknown>
      } finally {
        await api?.close()
      }
    }
    type Choice = { message: { content: string }; logprobs: { content: { token: string; logprob: number }[] } }
    const local = ((await ask('local')).choices as Choice[])[0]
    const remote = ((await ask('remote')).choices as Choice[])[0]
    expect(valid(JSON.parse(remote.message.content))).toBe(true)
    expect(remote.message.content).toBe(local.message.content)
    expect(remote.logprobs.content.map((c) => c.token)).toEqual(local.logprobs.content.map((c) => c.token))
    for (const [i, c] of remote.logprobs.content.entries()) {
      expect(c.logprob).toBeCloseTo(local.logprobs.content[i].logprob, 5)
    }
  })
})
