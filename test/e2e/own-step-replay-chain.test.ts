import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

/*
 * Issue 31 item 4, chained routes: a new client with no canary yet (`firstAtOnceMacs: 0` makes the
 * bundled model's set "slow", built in the background) replays its first generation's own steps at
 * the end, and now its chained steps too: the client sent the first hop's input and got the last
 * hop's answer, and each middle hop's output comes back from its audit, bound to what it signed and
 * forwarded (client/verification/own-step-replay.ts). Real node processes, chain mode, a tamperer
 * in the middle of A → T → B: T is convicted by the replay of its own rows and its text rolled
 * back; A and the tail B, which computed honestly on what T sent it, are verified, not blamed.
 */
const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const MAX_TOKENS = 32

describe('own-step replay of a chained route, real peers', () => {
  const nodes: Record<string, LocalNode> = {}
  beforeAll(async () => {
    nodes.a = await startLocalNode({ model: GGUF_PATH, layers: '1:2', args: FAST })
    const bootstrap = [nodes.a.addrs[0]]
    nodes.t = await startLocalNode({
      model: GGUF_PATH,
      layers: '2:3',
      bootstrap,
      args: [...FAST, '--tamper', 'noise', '--tamper-size', '0.5']
    })
    nodes.c = await startLocalNode({ model: GGUF_PATH, layers: '2:3', bootstrap, args: FAST })
    nodes.b = await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap, args: FAST })
  }, 120_000)
  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  /** One new client's generation, chained; `first`: its first route's peers. */
  const attempt = async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      forwarding: 'chain',
      canaries: { firstAtOnceMacs: 0 },
      // a hop that fails to open under load is out for 1 ms only: the next route tried is T's again
      banMs: 1,
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      for (let i = 0; i < 100 && (await client.swarm()).length < 4; i++) await new Promise((r) => setTimeout(r, 100))
      // C, T's honest twin, looks a minute per block slow to this client (its own load measure): the
      // first route is A → T → B whatever the round trips; after T's conviction only C is left
      client.view.load.observe(nodes.c.peerId, 60_000, 1, 1)
      const result = await client.generate(ref.prompt, { maxTokens: MAX_TOKENS, temperature: 0 })
      const route = events.find((e) => e.event === 'route')!
      expect(route.forwarding).toBe('chain')
      return { events, result, first: (route.route as Array<{ peerId: string }>).map((h) => h.peerId) }
    } finally {
      await client.close()
    }
  }

  it('convicts a tampering middle hop from the chain’s own steps; its neighbours are verified', {
    timeout: 600_000
  }, async () => {
    // Under heavy load a route refresh drops a peer whose info answer took over 5 s
    // (client/routing/swarm-view.ts), and the client then routes over C without ever meeting T:
    // every generation's text is checked the same way, so a new client tries again, at most thrice.
    let run = await attempt()
    for (let tries = 1; tries < 3 && !run.first.includes(nodes.t.peerId); tries++) {
      expect(run.result.tokens).toEqual(ref.generated_tokens.slice(0, MAX_TOKENS))
      run = await attempt()
    }
    const { events, result, first } = run
    expect(first, JSON.stringify(events.filter((e) => e.event === 'failover'))).toEqual([
      nodes.a.peerId,
      nodes.t.peerId,
      nodes.b.peerId
    ])
    expect(result.tokens).toEqual(ref.generated_tokens.slice(0, MAX_TOKENS))
    // the chain's steps were replayed hop by hop: T's judged not benign, A's and B's benign
    const checked = events.filter((e) => e.event === 'own-steps-checked')
    const withT = checked.find((e) => (e.peers as Record<string, unknown>)[nodes.t.peerId] !== undefined)
    expect(withT).toBeDefined()
    const peers = withT!.peers as Record<string, { steps: number; benign: boolean }>
    expect(peers[nodes.t.peerId].benign).toBe(false)
    expect(peers[nodes.a.peerId]).toMatchObject({ benign: true })
    expect(peers[nodes.b.peerId]).toMatchObject({ benign: true })
    expect(peers[nodes.a.peerId].steps).toBeGreaterThan(1)
    // convicted and its text rolled back before the result was final; no honest peer blamed
    const { report } = result
    expect(report.excludedPeers).toEqual([nodes.t.peerId])
    expect(report.rollbacks.some((b) => b.convicted.includes(nodes.t.peerId))).toBe(true)
    expect(report.rollbacks.every((b) => (b.unverifiable ?? []).length === 0)).toBe(true)
    expect(report.routes.at(-1)!.map((h) => h.peerId)).toEqual([nodes.a.peerId, nodes.c.peerId, nodes.b.peerId])
    for (const v of report.canaries) if (v.peerId !== nodes.t.peerId) expect(v.excluded).toBe(false)
  })
})
