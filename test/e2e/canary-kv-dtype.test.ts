import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

// Canary calibration per KV dtype (canary/calibrate.ts benignClassKey): an honest node with a
// q8_0 or f16 KV cache drifts more than one with f32 (a q8_0 cache about 10×), benignly. The
// client scores each hop in the class of the KV dtype it announces, so honest q8_0/f16 nodes
// are never convicted, while a q8_0-cache node that tampers still is.

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

describe('canaries and KV cache dtypes over real node processes', () => {
  const nodes: Record<string, LocalNode> = {}

  beforeAll(async () => {
    // The tamperer serves the remote span [1,4) in one hop, the cheapest route, so the client
    // uses it first; then the honest q8_0 node [1,2) and f16 node [2,4) carry the rest.
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--kv-dtype', 'q8_0', '--tamper', 'noise', '--tamper-size', '0.05']
    })
    const bootstrap = [nodes.tamperer.addrs[0]]
    nodes.q8 = await startLocalNode({ model: GGUF_PATH, layers: '1:2', bootstrap, args: [...FAST, '--kv-dtype', 'q8_0'] })
    nodes.f16 = await startLocalNode({ model: GGUF_PATH, layers: '2:4', bootstrap, args: [...FAST, '--kv-dtype', 'f16'] })
  }, 60_000)

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('honest q8_0 and f16 KV nodes stay trusted under canaries; a tampering q8_0 node is convicted', {
    timeout: 240_000
  }, async () => {
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: { rate: 1, seed: 5 }
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      const result = await client.generate(ref.prompt, { maxTokens: 48, temperature: 0 })
      const { report } = result
      const verdicts = Object.fromEntries(report.canaries.map((v) => [v.peerId, v]))
      expect(report.excludedPeers).toContain(nodes.tamperer.peerId)
      expect(verdicts[nodes.tamperer.peerId].excluded).toBe(true)
      expect(report.excludedPeers).not.toContain(nodes.q8.peerId)
      expect(report.excludedPeers).not.toContain(nodes.f16.peerId)
      for (const honest of [nodes.q8, nodes.f16]) expect(verdicts[honest.peerId]?.excluded).toBe(false)
      // the honest nodes carried the rest of the generation and its canaries
      expect(report.routes.at(-1)!.map((h) => h.peerId)).toEqual([nodes.q8.peerId, nodes.f16.peerId])
      for (const honest of [nodes.q8, nodes.f16]) expect(verdicts[honest.peerId]?.canariesSent ?? 0).toBeGreaterThan(0)
    } finally {
      await client.close()
    }
  })
})
