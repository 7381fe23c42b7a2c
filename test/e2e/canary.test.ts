import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/local-swarm.js'
import { verifyReceipt } from '../../protocol/index.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

describe('verified inference: a tampering peer is caught by canaries and routed around', () => {
  const nodes: Record<string, LocalNode> = {}

  beforeAll(async () => {
    // The tamperer serves the whole remote span [1,4) in one hop, the cheapest route, so the
    // client uses it first; two honest peers serve [1,2) and [2,4).
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--tamper', 'noise', '--tamper-size', '0.5']
    })
    const bootstrap = [nodes.tamperer.addrs[0]]
    nodes.honestA = await startLocalNode({ model: GGUF_PATH, layers: '1:2', bootstrap, args: FAST })
    nodes.honestB = await startLocalNode({ model: GGUF_PATH, layers: '2:4', bootstrap, args: FAST })
  })

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('excludes the tamperer, finishes with the honest output, and the report shows the evidence', {
    timeout: 120_000
  }, async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: { rate: 0.5, seed: 3 },
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      const result = await client.generate(ref.prompt, { maxTokens: 64, temperature: 0 })
      const { tamperer, honestA, honestB } = nodes
      expect(result.tokens).toEqual(ref.generated_tokens)
      const { report } = result
      expect(report.excludedPeers).toContain(tamperer.peerId)
      expect(report.routes.at(-1)!.map((h) => h.peerId)).toEqual([honestA.peerId, honestB.peerId])
      const verdicts = Object.fromEntries(report.canaries.map((v) => [v.peerId, v]))
      expect(verdicts[tamperer.peerId].excluded).toBe(true)
      expect(verdicts[tamperer.peerId].posterior).toBeGreaterThan(0.99)
      for (const honest of [honestA, honestB]) {
        if (verdicts[honest.peerId]) expect(verdicts[honest.peerId].excluded).toBe(false)
      }
      // the evidence: the canary that convicted it, and its own signed receipt for the wrong answer
      const ev = report.evidence.find((e) => e.peerId === tamperer.peerId)!
      expect(ev.drift.relL2).toBeGreaterThan(0.1)
      expect(await verifyReceipt(ev.receipt!, ev.sessionId, ev.stepId)).toBe(true)
      expect(report.receipts.invalid).toBe(0)
      if (report.routes[0].some((h) => h.peerId === tamperer.peerId)) expect(report.reruns).toBeGreaterThanOrEqual(1)
      expect(events.some((e) => e.event === 'excluded' && e.peerId === tamperer.peerId)).toBe(true)
    } finally {
      await client.close()
    }
  })
})
