import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type GenerateResult } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { CLI } from '../helpers/cli.js'
import { cliAsync } from '../helpers/cli-async.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

// Issue #35, end to end: node processes on 127.0.0.1 serve blocks [1,3) and [3,5) of the bundled
// model; with head 'remote' the peer of [3,5) runs the final norm and LM head and answers a
// sealed top-k. Greedy tokens equal llama2.c's (relayed, chained, speculative), sampling runs
// and checks the head peer without convicting it, and a peer that swaps the top token is
// convicted and its tokens recomputed through an honest one.

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const PROMPT = 'Once upon a time'

describe('the head on a peer (node processes on 127.0.0.1)', () => {
  const nodes: LocalNode[] = []
  let bootstrap: string[]
  let honestLast: LocalNode
  let tamperer: LocalNode

  beforeAll(async () => {
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: FAST }))
    bootstrap = [nodes[0].addrs[0]]
    honestLast = await startLocalNode({ model: GGUF_PATH, layers: '3:5', bootstrap, args: FAST })
    nodes.push(honestLast)
  }, 60_000)

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  async function run(
    o: { forwarding: 'relay' | 'chain'; speculate?: 'off' | 'ngram'; temperature?: number; seed?: number },
    before?: (c: Awaited<ReturnType<typeof createClient>>) => void
  ): Promise<GenerateResult> {
    const client = await createClient({
      bootstrap,
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      head: 'remote',
      edgeLast: 0,
      forwarding: o.forwarding,
      speculate: o.speculate ?? 'off',
      canaries: false,
      routeTimeoutMs: 20_000
    })
    try {
      before?.(client)
      return await client.generate(PROMPT, { maxTokens: 64, temperature: o.temperature ?? 0, seed: o.seed })
    } finally {
      await client.close()
    }
  }

  for (const forwarding of ['relay', 'chain'] as const) {
    it(`${forwarding}: greedy tokens equal llama2.c's, the head checked, nobody convicted`, { timeout: 60_000 }, async () => {
      const r = await run({ forwarding })
      expect(r.tokens).toEqual(ref.generated_tokens)
      expect(r.head?.steps).toBe(r.tokens.length)
      expect(r.head?.checks).toBeGreaterThan(0)
      expect(r.head?.violations).toBe(0)
      expect(r.head?.convicted).toEqual([])
      // the last hop sent its hidden output in q8_0 (the check dtype), not the session's f32
      expect(r.report.wire.hops.some((h) => h.start === 3 && h.wireDtype === 'q8_0')).toBe(true)
    })
  }

  it('chain, speculative (n-gram drafts checked through the remote head): the same greedy tokens', {
    timeout: 60_000
  }, async () => {
    const r = await run({ forwarding: 'chain', speculate: 'ngram' })
    expect(r.tokens).toEqual(ref.generated_tokens)
    expect(r.speculation.steps).toBeGreaterThan(0)
    expect(r.head?.violations).toBe(0)
  })

  it('sampling at temperature 0.9: tokens come, seeded runs repeat, the honest head is not convicted', {
    timeout: 60_000
  }, async () => {
    const a = await run({ forwarding: 'relay', temperature: 0.9, seed: 7 })
    const b = await run({ forwarding: 'chain', temperature: 0.9, seed: 7 })
    expect(a.tokens.length).toBeGreaterThan(10)
    expect(b.tokens).toEqual(a.tokens)
    expect(a.head?.violations).toBe(0)
    expect(b.head?.convicted).toEqual([])
  })

  it('layerswarm generate --head remote gives the same tokens; --help says what the head peer learns', {
    timeout: 60_000
  }, async () => {
    const r = await cliAsync([
      'generate',
      '--bootstrap',
      bootstrap.join(','),
      '--model',
      GGUF_PATH,
      '--prompt',
      PROMPT,
      '--max-tokens',
      '64',
      '--temperature',
      '0',
      '--head',
      'remote',
      '--canary-rate',
      '0',
      '--json'
    ])
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout) as { tokens: number[]; head: { steps: number; violations: number } }
    expect(out.tokens).toEqual(ref.generated_tokens)
    expect(out.head.steps).toBe(out.tokens.length)
    expect(out.head.violations).toBe(0)
    for (const cmd of ['generate', 'api']) {
      const help = await cliAsync([cmd, '--help'])
      expect(help.stdout.replace(/\s+/g, ' ')).toContain('THAT PEER LEARNS THE OUTPUT DISTRIBUTION, HENCE THE GENERATED TEXT')
    }
  })

  it('layerswarm api --head remote: a greedy completion is the reference text', { timeout: 90_000 }, async () => {
    const api = spawn(
      process.execPath,
      [
        CLI,
        'api',
        '--bootstrap',
        bootstrap.join(','),
        '--model',
        GGUF_PATH,
        '--listen',
        '127.0.0.1:0',
        '--head',
        'remote',
        '--canary-rate',
        '0'
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] }
    )
    try {
      const first = await new Promise<string>((resolve) => createInterface({ input: api.stdout! }).once('line', resolve))
      const { url } = JSON.parse(first) as { url: string }
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'stories260K', prompt: PROMPT, max_tokens: 32, temperature: 0 })
      })
      expect(res.status).toBe(200)
      const body = (await res.json()) as { choices: { text: string }[] }
      const client = await createClient({ bootstrap, model: GGUF_PATH, canaries: false })
      try {
        expect(body.choices[0].text).toBe(client.tokenizer.decode(ref.generated_tokens.slice(0, 32)))
      } finally {
        await client.close()
      }
    } finally {
      api.kill('SIGTERM')
    }
  })

  it('a head peer that swaps the top token is convicted; its tokens are recomputed through an honest one', {
    timeout: 120_000
  }, async () => {
    tamperer = await startLocalNode({ model: GGUF_PATH, layers: '3:5', bootstrap, args: [...FAST, '--tamper-head', 'swap'] })
    nodes.push(tamperer)
    // the honest [3,5) is banned at first, so the first route runs through the tamperer
    const r = await run({ forwarding: 'relay' }, (c) => c.view.ban(honestLast.peerId, 3_000))
    expect(r.head?.convicted).toEqual([tamperer.peerId])
    expect(r.tokens).toEqual(ref.generated_tokens)
    expect(r.report.rollbacks.length).toBeGreaterThan(0)
  })
})
