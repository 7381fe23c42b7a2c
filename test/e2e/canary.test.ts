import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
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
      expect(await verifyReceipt(ev.receipt!, { ...ev, modelId: ev.modelId! })).toBe(true)
      expect(report.receipts.invalid).toBe(0)
      if (report.routes[0].some((h) => h.peerId === tamperer.peerId)) expect(report.reruns).toBeGreaterThanOrEqual(1)
      expect(events.some((e) => e.event === 'excluded' && e.peerId === tamperer.peerId)).toBe(true)
    } finally {
      await client.close()
    }
  })

  it("a trust file carries the conviction and the honest peers' records to the next client", { timeout: 120_000 }, async () => {
    const trustFile = join(mkdtempSync(join(tmpdir(), 'layerswarm-trust-')), 'trust.json')
    const { tamperer, honestA, honestB } = nodes
    const run = async (seed: number) => {
      const events: Array<Record<string, unknown>> = []
      const client = await createClient({
        bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
        model: GGUF_PATH,
        kernels: createReferenceKernels(),
        canaries: { seed, trustFile },
        // one token per step: the burst (canary/adaptive-rate.ts) is sized in real steps, and this
        // test counts on 64 of them (speculative steps carry ~2 tokens each on this model)
        speculate: 'off',
        log: (e) => events.push(e)
      })
      try {
        await client.view.waitForRoute(1, 4, 20_000)
        const result = await client.generate(ref.prompt, { maxTokens: 64, temperature: 0 })
        expect(result.tokens).toEqual(ref.generated_tokens)
        return { result, events }
      } finally {
        await client.close()
      }
    }
    // a new client: the tamperer is convicted (new peers get a burst of canaries)
    const first = await run(11)
    expect(first.result.report.excludedPeers).toContain(tamperer.peerId)
    expect(statSync(trustFile).mode & 0o777).toBe(0o600)
    const kept = JSON.parse(readFileSync(trustFile, 'utf8'))
    const peers = Object.values(kept.models as Record<string, { peers: Array<{ peerId: string; excluded: boolean }> }>)[0].peers
    expect(peers.find((p) => p.peerId === tamperer.peerId)?.excluded).toBe(true)
    // the next client reads it: the tamperer is never routed, and the honest peers' records
    // carry on (their observations count on from the first client's)
    const second = await run(12)
    expect(second.events.find((e) => e.event === 'trust-file')).toMatchObject({ excluded: 1 })
    for (const route of second.result.report.routes) expect(route.map((h) => h.peerId)).not.toContain(tamperer.peerId)
    expect(second.result.report.routes[0].map((h) => h.peerId)).toEqual([honestA.peerId, honestB.peerId])
    expect(second.events.find((e) => e.event === 'trust-file')).toMatchObject({ peers: 3 })
    const before = Object.fromEntries(first.result.report.canaries.map((v) => [v.peerId, v]))
    const after = Object.fromEntries(second.result.report.canaries.map((v) => [v.peerId, v]))
    for (const honest of [honestA, honestB]) {
      const [b, a] = [before[honest.peerId], after[honest.peerId]]
      // the detector goes on from the first client's evidence...
      expect(a.observations).toBe(b.observations + a.canariesSent)
      // ...past the new-peer burst the first client sent them
      expect(b.observations).toBeGreaterThanOrEqual(16)
      expect(a.canariesSent).toBeLessThan(b.canariesSent)
      expect(a.excluded).toBe(false)
    }
    expect(second.result.report.excludedPeers).toContain(tamperer.peerId)
  })
})
