import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { verifyReceipt } from '../../protocol/index.js'
import { createReferenceKernels } from '../../shards/index.js'
import { honestTokens } from '../helpers/honest-tokens.js'
import { GGUF_PATH } from '../helpers/reference.js'

const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const PROMPT = 'Once upon a time'
const MAX_TOKENS = 160
const AFTER = 64

describe('a peer that tampers only late in sessions (positions ≥ 64)', () => {
  const nodes: Record<string, LocalNode> = {}
  let expected: number[]

  beforeAll(async () => {
    // The tamperer serves the whole remote span [1,4) in one hop (the cheapest route, used first)
    // and answers honestly at positions below 64; two honest peers serve [1,2) and [2,4).
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--tamper', 'noise', '--tamper-size', '0.5', '--tamper-after', String(AFTER)]
    })
    const bootstrap = [nodes.tamperer.addrs[0]]
    nodes.honestA = await startLocalNode({ model: GGUF_PATH, layers: '1:2', bootstrap, args: FAST })
    nodes.honestB = await startLocalNode({ model: GGUF_PATH, layers: '2:4', bootstrap, args: FAST })
    expected = await honestTokens(PROMPT, MAX_TOKENS)
    expect(expected).toHaveLength(MAX_TOKENS)
  })

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  /** With honest A out of routes for `banMs`, the first route is the tamperer (a rerun waits for A). */
  const generate = async (canaryLength: number | undefined, banMs: number) => {
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: { rate: 0.5, seed: 3, length: canaryLength },
      banMs: 1,
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      for (let i = 0; i < 100 && (await client.swarm()).length < 3; i++) await new Promise((r) => setTimeout(r, 100))
      client.view.ban(nodes.honestA.peerId, banMs)
      const result = await client.generate(PROMPT, { maxTokens: MAX_TOKENS, temperature: 0 })
      // the first run's route (a re-run reports its own routes)
      const first = (events.find((e) => e.event === 'route')!.route as Array<{ peerId: string }>).map((h) => h.peerId)
      return { ...result, first }
    } finally {
      await client.close()
    }
  }

  it('short canaries (40 positions, the old length) never see it: it goes undetected and the output is wrong', {
    timeout: 120_000
  }, async () => {
    const { tokens, report, first } = await generate(40, 60_000)
    expect(first).toEqual([nodes.tamperer.peerId])
    const v = report.canaries.find((c) => c.peerId === nodes.tamperer.peerId)!
    expect(v.canariesSent).toBeGreaterThan(30)
    expect(v.excluded).toBe(false)
    expect(report.excludedPeers).not.toContain(nodes.tamperer.peerId)
    expect(report.reruns).toBe(0)
    expect(tokens.slice(0, AFTER - 8)).toEqual(expected.slice(0, AFTER - 8)) // honest early on
    expect(tokens).not.toEqual(expected)
  })

  it('canaries as long as real sessions catch it at a late position and the generation is re-run on honest peers', {
    timeout: 120_000
  }, async () => {
    const { tokens, report, first } = await generate(undefined, 4_000)
    const { tamperer, honestA, honestB } = nodes
    expect(first).toEqual([tamperer.peerId])
    expect(report.excludedPeers).toContain(tamperer.peerId)
    expect(report.routes.at(-1)!.map((h) => h.peerId)).toEqual([honestA.peerId, honestB.peerId])
    expect(tokens).toEqual(expected)
    const ev = report.evidence.find((e) => e.peerId === tamperer.peerId)!
    expect(ev.position).toBeGreaterThanOrEqual(AFTER) // convicted by a decoy step past position 64
    expect(ev.drift.relL2).toBeGreaterThan(0.1)
    expect(await verifyReceipt(ev.receipt!, { ...ev, modelId: ev.modelId! })).toBe(true)
    for (const honest of [honestA, honestB])
      expect(report.canaries.find((c) => c.peerId === honest.peerId)?.excluded ?? false).toBe(false)
  })
})
