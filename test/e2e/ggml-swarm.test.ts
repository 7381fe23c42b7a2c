import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { ggmlCpuSkipReason } from '../helpers/ggml.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

// Issue 32: a ggml-cpu node among engine nodes, as separate processes over real libp2p: the
// swarm gives llama.cpp's greedy tokens relayed and chained, the client's canaries (checked
// against its reference kernels) do not convict the honest ggml node, and a tampering ggml
// node is convicted and routed around.

const why = ggmlCpuSkipReason()
const ref = loadReference('stories260K_greedy_once_upon_a_time')
const N_TOKENS = 32
const ENGINE = ['--kernels', 'reference', '--announce-interval', '300']
// One ggml thread: its CPU workers spin between ops, which a shared 2-core host punishes.
const GGML = ['--backend', 'ggml-cpu', '--threads', '1', '--kv-dtype', 'f16', '--announce-interval', '300']

describe.skipIf(why !== '')('a ggml-cpu node in a swarm', () => {
  const nodes: Record<string, LocalNode> = {}

  beforeAll(async () => {
    nodes.a = await startLocalNode({ model: GGUF_PATH, layers: '1:2', args: ENGINE })
    const bootstrap = [nodes.a.addrs[0]]
    nodes.ggml = await startLocalNode({ model: GGUF_PATH, layers: '2:3', bootstrap, args: GGML })
    nodes.c = await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap, args: ENGINE })
  })

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  for (const forwarding of ['relay', 'chain'] as const) {
    it(`${forwarding}: llama.cpp's greedy tokens through the ggml node; its canaries pass`, async () => {
      const client = await createClient({
        bootstrap: [nodes.a.addrs[0]],
        model: GGUF_PATH,
        kernels: createReferenceKernels(),
        routeTimeoutMs: 20_000,
        canaries: { rate: 0.5, seed: 5 },
        forwarding
      })
      try {
        await client.view.waitForRoute(1, 4, 20_000)
        const peer = client.view.list().find((p) => p.peerId === nodes.ggml.peerId)
        expect(peer?.backend).toBe('ggml-cpu')
        const result = await client.generate(ref.prompt, { maxTokens: N_TOKENS, temperature: 0 })
        expect(result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
        expect(result.report.routes[0].map((h) => h.peerId)).toEqual([nodes.a.peerId, nodes.ggml.peerId, nodes.c.peerId])
        expect(result.report.excludedPeers).toEqual([])
        const verdict = result.report.canaries.find((v) => v.peerId === nodes.ggml.peerId)
        expect(verdict?.observations ?? 0).toBeGreaterThan(0)
        if (process.env.GGML_DEBUG) console.log(forwarding, verdict, verdict?.lastDrift)
        expect(verdict?.excluded).toBe(false)
      } finally {
        await client.close()
      }
    })
  }
})

describe.skipIf(why !== '')('a tampering ggml-cpu node', () => {
  const nodes: Record<string, LocalNode> = {}

  beforeAll(async () => {
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...GGML, '--tamper', 'noise', '--tamper-size', '0.5']
    })
    const bootstrap = [nodes.tamperer.addrs[0]]
    nodes.honestA = await startLocalNode({ model: GGUF_PATH, layers: '1:2', bootstrap, args: GGML })
    nodes.honestB = await startLocalNode({ model: GGUF_PATH, layers: '2:4', bootstrap, args: ENGINE })
  })

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('is convicted and routed around; the honest ggml node is not', { timeout: 120_000 }, async () => {
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: { rate: 0.5, seed: 3 }
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      const result = await client.generate(ref.prompt, { maxTokens: N_TOKENS, temperature: 0 })
      expect(result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
      const { report } = result
      expect(report.excludedPeers).toEqual([nodes.tamperer.peerId])
      expect(report.routes.at(-1)?.map((h) => h.peerId)).toEqual([nodes.honestA.peerId, nodes.honestB.peerId])
      const verdicts = Object.fromEntries(report.canaries.map((v) => [v.peerId, v]))
      expect(verdicts[nodes.tamperer.peerId].excluded).toBe(true)
      if (verdicts[nodes.honestA.peerId]) expect(verdicts[nodes.honestA.peerId].excluded).toBe(false)
    } finally {
      await client.close()
    }
  })
})
