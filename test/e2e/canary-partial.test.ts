import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

/*
 * Issue 16: a peer that knows the code and the model but not the client's secret can only answer
 * canaries honestly by luck: it cannot tell them from real steps, so the best it can do is tamper
 * with a random fraction of all steps. At 10 % (`--tamper-rate 0.1`) it must still be convicted
 * within 100 steps. Real nodes; each fresh client (secret canaries, default rates) generates until
 * the tamperer is excluded, counting the real steps routed through it. The design target is the
 * mean (canary/adaptive-rate.ts: E ≤ 40 steps with a 24-canary burst, 4 decoys in flight); one in
 * twelve peers passes the burst clean (0.9^24) and is then caught at the base rate, later (mean
 * 1/(0.1 · 0.03) ≈ 333 steps), so a single run exceeds 100 steps with probability ≈ 0.07: the
 * median is asserted, the mean only from 20 clients, where it is the bar.
 * PARTIAL_CLIENTS sets the clients (CI: 8). Measured: 10 clients median 9, mean 51.9; 20 clients
 * median 7, mean 8.2 steps
 * (with a 16-canary burst one canary a step: median 16, mean 140.4).
 */
const CLIENTS = Number(process.env.PARTIAL_CLIENTS ?? 8)
const CAP_STEPS = 2_000
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const ref = loadReference('stories260K_greedy_once_upon_a_time')

describe('a tamperer on a random 10 % of steps is convicted (real nodes, secret canaries)', () => {
  const nodes: Record<string, LocalNode> = {}

  beforeAll(async () => {
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--tamper', 'noise', '--tamper-size', '0.5', '--tamper-rate', '0.1']
    })
    const bootstrap = [nodes.tamperer.addrs[0]]
    nodes.honestA = await startLocalNode({ model: GGUF_PATH, layers: '1:2', bootstrap, args: FAST })
    nodes.honestB = await startLocalNode({ model: GGUF_PATH, layers: '2:4', bootstrap, args: FAST })
  }, 120_000)

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it(`${CLIENTS} fresh clients: every one convicts it; median steps within 100 (the mean too, from 20 clients)`, {
    timeout: 3_600_000
  }, async () => {
    const tamperer = nodes.tamperer.peerId
    const steps: number[] = []
    for (let i = 0; i < CLIENTS; i++) {
      let through = 0
      let convictedAt: number | undefined
      const client = await createClient({
        bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
        model: GGUF_PATH,
        kernels: createReferenceKernels(),
        log: (e) => {
          if (convictedAt !== undefined) return
          if (e.event === 'step' && (e.hops as { peerId: string }[]).some((h) => h.peerId === tamperer)) through++
          if (e.event === 'excluded' && e.peerId === tamperer) convictedAt = through
        }
      })
      try {
        await client.view.waitForRoute(1, 4, 20_000)
        while (convictedAt === undefined && through < CAP_STEPS) {
          const result = await client.generate(ref.prompt, { maxTokens: 200 })
          // once convicted, what the generation returns went through honest peers only
          if (convictedAt !== undefined) expect(result.report.routes.at(-1)!.map((h) => h.peerId)).not.toContain(tamperer)
        }
      } finally {
        await client.close()
      }
      expect(convictedAt, `client ${i}: not convicted in ${through} steps`).toBeDefined()
      steps.push(convictedAt!)
      console.log(JSON.stringify({ client: i, stepsToConviction: convictedAt }))
    }
    const sorted = [...steps].sort((a, b) => a - b)
    const median = sorted[Math.floor(sorted.length / 2)]
    const mean = steps.reduce((s, x) => s + x, 0) / steps.length
    console.log(JSON.stringify({ clients: CLIENTS, stepsToConviction: steps, median, mean: Number(mean.toFixed(1)) }))
    expect(median).toBeLessThanOrEqual(100)
    if (CLIENTS >= 20) expect(mean).toBeLessThanOrEqual(100) // the bar, on enough clients to read a mean
  })
})
