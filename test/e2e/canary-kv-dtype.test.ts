import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

// Canary calibration per KV dtype (canary/calibrate.ts benignClassKey): an honest node with a
// q8_0 KV cache drifts about 10× more than one with f32 or f16, benignly. The client scores
// each hop in the class of the KV dtype it announces, so honest q8_0/f16 nodes are never
// convicted, while a q8_0-cache node that tampers (noise 0.5, as test/e2e/canary.test.ts) still is.

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

describe('canaries and KV cache dtypes over real node processes', () => {
  const nodes: Record<string, LocalNode> = {}

  beforeAll(async () => {
    nodes.q8 = await startLocalNode({ model: GGUF_PATH, layers: '1:2', args: [...FAST, '--kv-dtype', 'q8_0'] })
    nodes.f16 = await startLocalNode({
      model: GGUF_PATH,
      layers: '2:4',
      bootstrap: [nodes.q8.addrs[0]],
      args: [...FAST, '--kv-dtype', 'f16']
    })
    // A swarm of its own (no bootstrap link to the honest nodes): the tamperer alone serves [1,4).
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--kv-dtype', 'q8_0', '--tamper', 'noise', '--tamper-size', '0.5']
    })
  }, 60_000)

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('honest q8_0 and f16 KV nodes stay trusted with a canary on every step', { timeout: 240_000 }, async () => {
    const client = await createClient({
      bootstrap: [nodes.q8.addrs[0], nodes.f16.addrs[0]],
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: { rate: 1, seed: 5 }
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      const { report } = await client.generate(ref.prompt, { maxTokens: 48, temperature: 0 })
      expect(report.excludedPeers).toEqual([])
      const verdicts = Object.fromEntries(report.canaries.map((v) => [v.peerId, v]))
      for (const honest of [nodes.q8, nodes.f16]) {
        expect(verdicts[honest.peerId]?.canariesSent ?? 0).toBeGreaterThan(0)
        expect(verdicts[honest.peerId].excluded).toBe(false)
      }
    } finally {
      await client.close()
    }
  })

  it('a q8_0 KV node that tampers is convicted', { timeout: 240_000 }, async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: [nodes.tamperer.addrs[0]],
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: { rate: 1, seed: 5 },
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      // Once convicted, nobody is left to serve [1,4): the generation ends without a route.
      await expect(client.generate(ref.prompt, { maxTokens: 48, temperature: 0 })).rejects.toMatchObject({ code: 'NO_ROUTE' })
      expect(events.some((e) => e.event === 'excluded' && e.peerId === nodes.tamperer.peerId)).toBe(true)
    } finally {
      await client.close()
    }
  })
})
