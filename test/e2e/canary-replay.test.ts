import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, verifyReplayEvidence } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { honestTokens } from '../helpers/honest-tokens.js'
import { GGUF_PATH } from '../helpers/reference.js'

const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const PROMPT = 'Once upon a time'
// ~140 steps to the tamperer at a tamper rate of 0.1: P(no step replayed) = 0.9^140 < 1e-6
const MAX_TOKENS = 128

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex')

/**
 * A replaying tamperer on `tampererLayers` (first, so the others bootstrap from it) and two honest
 * peers serving [1,2) and [2,4), plus the honest tokens they must produce.
 */
async function startReplaySwarm(nodes: Record<string, LocalNode>, tampererLayers: string): Promise<number[]> {
  nodes.tamperer = await startLocalNode({
    model: GGUF_PATH,
    layers: tampererLayers,
    args: [...FAST, '--tamper', 'replay', '--tamper-rate', '0.1']
  })
  const bootstrap = [nodes.tamperer.addrs[0]]
  nodes.honestA = await startLocalNode({ model: GGUF_PATH, layers: '1:2', bootstrap, args: FAST })
  nodes.honestB = await startLocalNode({ model: GGUF_PATH, layers: '2:4', bootstrap, args: FAST })
  return await honestTokens(PROMPT, MAX_TOKENS)
}

describe('a peer replaying earlier outputs on 10 % of steps is convicted by its own receipts', () => {
  const nodes: Record<string, LocalNode> = {}
  let expected: number[]

  beforeAll(async () => {
    // The tamperer serves the whole remote span [1,4) in one hop and, on a seeded 10 % of steps,
    // returns the most recent output it computed for another step; two honest peers serve [1,2) and [2,4).
    expected = await startReplaySwarm(nodes, '1:4')
    expect(expected).toHaveLength(MAX_TOKENS)
  })

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('excludes it with both receipts as evidence, re-runs, and finishes with the honest tokens', {
    timeout: 180_000
  }, async () => {
    const { tamperer, honestA, honestB } = nodes
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: { seed: 5 },
      banMs: 1,
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      for (let i = 0; i < 100 && (await client.swarm()).length < 3; i++) await new Promise((r) => setTimeout(r, 100))
      // honest A out of routes for a moment: the first route is the tamperer (the re-run waits for A)
      client.view.ban(honestA.peerId, 3_000)
      const { tokens, report } = await client.generate(PROMPT, { maxTokens: MAX_TOKENS, temperature: 0 })
      const first = (events.find((e) => e.event === 'route')!.route as Array<{ peerId: string }>).map((h) => h.peerId)
      expect(first).toEqual([tamperer.peerId])

      expect(report.excludedPeers).toContain(tamperer.peerId)
      expect(events.some((e) => e.event === 'excluded' && e.peerId === tamperer.peerId && e.why === 'replayed output')).toBe(true)
      // the evidence: two receipts it signed, one output hash for two different inputs
      const ev = report.replays.find((e) => e.peerId === tamperer.peerId)!
      expect(ev).toBeDefined()
      expect(hex(ev.original.receipt.outputHash)).toBe(hex(ev.replayed.receipt.outputHash))
      expect(hex(ev.original.receipt.inputHash)).not.toBe(hex(ev.replayed.receipt.inputHash))
      expect(await verifyReplayEvidence(ev)).toBe(true)
      // no honest peer's equal outputs (decoys re-sending canary rows, retries) were taken for replays
      expect(report.replays.map((e) => e.peerId)).toEqual([tamperer.peerId])
      for (const honest of [honestA, honestB]) {
        expect(report.canaries.find((c) => c.peerId === honest.peerId)?.excluded ?? false).toBe(false)
        expect(events.some((e) => e.event === 'excluded' && e.peerId === honest.peerId)).toBe(false)
      }
      expect(report.receipts.invalid).toBe(0)
      expect(report.reruns).toBeGreaterThanOrEqual(1)
      expect(report.routes.at(-1)!.map((h) => h.peerId)).toEqual([honestA.peerId, honestB.peerId])
      expect(tokens).toEqual(expected)
    } finally {
      await client.close()
    }
  })
})

describe('chained forwarding: a replaying first hop is convicted by the receipts its downstream carries back', () => {
  const nodes: Record<string, LocalNode> = {}
  let expected: number[]

  beforeAll(async () => {
    // The tamperer serves [1,2) and replays on 10 % of steps; honest A serves [1,2) too, B [2,4).
    expected = await startReplaySwarm(nodes, '1:2')
  })

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('excludes it, blames no honest hop, and finishes with the honest tokens', { timeout: 180_000 }, async () => {
    const { tamperer, honestA, honestB } = nodes
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      forwarding: 'chain',
      canaries: { seed: 6 },
      banMs: 1,
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      for (let i = 0; i < 100 && (await client.swarm()).length < 3; i++) await new Promise((r) => setTimeout(r, 100))
      client.view.ban(honestA.peerId, 3_000)
      const { tokens, report } = await client.generate(PROMPT, { maxTokens: MAX_TOKENS, temperature: 0 })
      const first = (events.find((e) => e.event === 'route')!.route as Array<{ peerId: string }>).map((h) => h.peerId)
      expect(first).toEqual([tamperer.peerId, honestB.peerId])
      expect(events.some((e) => e.event === 'excluded' && e.peerId === tamperer.peerId && e.why === 'replayed output')).toBe(true)
      expect(report.replays.map((e) => e.peerId)).toEqual([tamperer.peerId])
      expect(await verifyReplayEvidence(report.replays[0])).toBe(true)
      for (const honest of [honestA, honestB])
        expect(events.some((e) => e.event === 'excluded' && e.peerId === honest.peerId)).toBe(false)
      expect(report.routes.at(-1)!.map((h) => h.peerId)).toEqual([honestA.peerId, honestB.peerId])
      expect(tokens).toEqual(expected)
    } finally {
      await client.close()
    }
  })
})
