import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type LayerswarmClient, type SpeculateMode } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { LINK_DELAY_ENV } from '../../protocol/index.js'
import { createReferenceKernels } from '../../shards/index.js'
import { generateWithFault } from '../helpers/fault.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
// every byte a node sends waits 3 ms (link-delay.ts): speculative steps over delayed links
const env = { ...process.env, [LINK_DELAY_ENV]: '3' }

describe('speculative steps through node processes on 127.0.0.1 (delayed links)', () => {
  const nodes: LocalNode[] = []
  let bootstrap: string[]

  beforeAll(async () => {
    // [1,3) three times (failover runs take one each), [3,4) once: a two-hop route.
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '3:4', args: FAST, env }))
    bootstrap = [nodes[0].addrs[0]]
    nodes.push(
      ...(await Promise.all([0, 1, 2].map(() => startLocalNode({ model: GGUF_PATH, layers: '1:3', bootstrap, args: FAST, env }))))
    )
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  async function withClient<T>(
    forwarding: 'relay' | 'chain',
    speculate: SpeculateMode,
    events: Array<Record<string, unknown>>,
    fn: (c: LayerswarmClient) => Promise<T>,
    extra: { snapshotEvery?: number; standby?: boolean } = {}
  ): Promise<T> {
    const alive = nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null)
    const client = await createClient({
      bootstrap: alive.map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      forwarding,
      speculate,
      // canaries on, checked often: decoys run beside the multi-row steps and must pass
      canaries: { rate: 0.5 },
      stepTimeoutMs: 5_000,
      routeTimeoutMs: 20_000,
      log: (e) => events.push(e),
      ...extra
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      return await fn(client)
    } finally {
      await client.close()
    }
  }

  for (const forwarding of ['relay', 'chain'] as const) {
    for (const speculate of ['ngram', 'self'] as const) {
      it(`${forwarding}, ${speculate}: greedy tokens equal one process's, canaries pass`, async () => {
        const events: Array<Record<string, unknown>> = []
        await withClient(forwarding, speculate, events, async (client) => {
          const r = await client.generate(ref.prompt, { maxTokens: 64, temperature: 0 })
          expect(r.tokens).toEqual(ref.generated_tokens)
          expect(r.speculation.tokens).toBe(64)
          expect(r.speculation.drafted).toBeGreaterThan(0)
          if (speculate === 'ngram') {
            // stories repeat themselves: drafts are kept, so fewer steps than tokens
            expect(r.speculation.accepted).toBeGreaterThan(0)
            expect(r.speculation.steps).toBeLessThan(63)
          }
          expect(r.convicted).toEqual([])
          expect(r.report.excludedPeers).toEqual([])
          expect(r.report.receipts.invalid).toBe(0)
          expect(r.report.receipts.checked).toBeGreaterThan(0)
          expect(r.report.canaries.reduce((n, c) => n + c.canariesSent, 0)).toBeGreaterThan(0)
          // steps of several rows went through every hop
          const steps = events.filter((e) => e.event === 'step')
          expect(steps.some((e) => (e.rows as number) > 1 && (e.startPos as number) > 0)).toBe(true)
        })
      }, 180_000)
    }
  }

  for (const forwarding of ['relay', 'chain'] as const) {
    // relayed, a standby fed with the sealed deltas takes the dead hop's span; chained, snapshots
    const standby = forwarding === 'relay'
    it(`${forwarding}, ngram: a hop killed mid-generation changes no token (sealed snapshots every 4 positions${standby ? ', a standby' : ''})`, async () => {
      const events: Array<Record<string, unknown>> = []
      await withClient(
        forwarding,
        'ngram',
        events,
        async (client) => {
          const plan = { at: 20, hop: 0, fault: (n: LocalNode) => n.kill() }
          const { tokens, result, victim } = await generateWithFault(client, events, nodes, plan)
          expect(tokens).toEqual(ref.generated_tokens)
          expect(result.tokens).toEqual(ref.generated_tokens)
          expect(result.report.failovers).toBeGreaterThanOrEqual(1)
          expect(result.report.excludedPeers).toContain(victim.peerId)
          expect(result.speculation.accepted).toBeGreaterThan(0)
          // the new route resumed from snapshots that never hold a rewound position
          const resume = events.find((e) => e.event === 'resume')
          expect(resume).toBeDefined()
          if (standby) expect(['standby', 'mixed']).toContain(resume!.from)
        },
        { snapshotEvery: 4, standby }
      )
    }, 180_000)
  }
})
