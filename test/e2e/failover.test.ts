import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { createFaultClient, generateWithFault, startSpans } from '../helpers/fault.js'
import { loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')

/** Hop session ids of successive routes: 128 random bits each, sharing no prefix and about half their bits. */
function expectUnrelatedIds(ids: string[]): void {
  for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/)
  expect(new Set(ids).size).toBe(ids.length)
  for (let i = 0; i + 1 < ids.length; i++) {
    const [a, b] = [Buffer.from(ids[i], 'hex'), Buffer.from(ids[i + 1], 'hex')]
    expect(a.subarray(0, 4).equals(b.subarray(0, 4))).toBe(false)
    let differing = 0
    for (let j = 0; j < a.length; j++) for (let x = a[j] ^ b[j]; x; x &= x - 1) differing++
    // Binomial(128, 1/2): outside [24, 104] with probability below 1e-12
    expect(differing).toBeGreaterThanOrEqual(24)
    expect(differing).toBeLessThanOrEqual(104)
  }
}

describe('failover: a node killed mid-generation changes no token', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    // Four peers serve the same span [1, 4): each run takes out the one it is using.
    nodes.push(...(await startSpans(['1:4', '1:4', '1:4', '1:4'])))
  })

  afterAll(async () => {
    for (const n of nodes) n.process.kill('SIGCONT')
    await Promise.all(nodes.map((n) => n.stop()))
  })

  for (const forwarding of ['relay', 'chain'] as const) {
    it(`${forwarding}, one hop: kill the serving peer at token 20 of 64`, async () => {
      const alive = nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null)
      const events: Array<Record<string, unknown>> = []
      const client = await createFaultClient(alive, events, { forwarding })
      try {
        await client.view.waitForRoute(1, 4, 20_000)
        const {
          tokens,
          result,
          victim: killed
        } = await generateWithFault(client, events, alive, { at: 20, fault: (n) => n.kill() })
        expect(tokens).toEqual(ref.generated_tokens)
        expect(result.tokens).toEqual(ref.generated_tokens)
        const { report } = result
        expect(report.failovers).toBeGreaterThanOrEqual(1)
        expect(report.routes.length).toBeGreaterThanOrEqual(2)
        expect(report.routes[0][0].peerId).toBe(killed!.peerId)
        expect(report.routes.at(-1)![0].peerId).not.toBe(killed!.peerId)
        expect(report.excludedPeers).toContain(killed!.peerId)
        // the new peer's KV was rebuilt by replaying the session's inputs
        expect(events.some((e) => e.event === 'replay' && (e.positions as number) >= 20)).toBe(true)
      } finally {
        await client.close()
      }
    })
  }

  it('relay: a peer that stalls past the step timeout is routed around', { timeout: 180_000 }, async () => {
    const alive = nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null)
    const events: Array<Record<string, unknown>> = []
    const client = await createFaultClient(alive, events, { stepTimeoutMs: 1_500 })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      // alive but silent: only the timeout can tell
      const stall = (n: LocalNode) => void n.process.kill('SIGSTOP')
      const { tokens, result, victim: stalled } = await generateWithFault(client, events, alive, { at: 30, fault: stall })
      expect(tokens).toEqual(ref.generated_tokens)
      expect(result.report.excludedPeers).toContain(stalled!.peerId)
      expect(events.some((e) => e.event === 'failover' && e.peerId === stalled!.peerId)).toBe(true)
      // a banned bootstrap peer is not asked for announcements: the stalled one held every
      // refresh (the failover's route among them) for the full 5 s timeout, and a full test run
      // past its limit
      await client.view.refresh()
      expect(client.view.lastRefresh.bootstrapAnnouncements.map((b) => b.peerId)).not.toContain(stalled!.peerId)
      expect(client.view.lastRefresh.bootstrapAnnouncements.length).toBeGreaterThan(0)
    } finally {
      await client.close()
    }
  })
})

describe('failover in a chain of hops', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    // A [1,2) then B or C [2,4): the route is two hops; the test kills the second.
    nodes.push(...(await startSpans(['1:2', '2:4', '2:4'])))
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('chain: kill the last hop at token 20 of 64; the first hop reports it, the client reroutes', {
    timeout: 180_000
  }, async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createFaultClient(nodes, events, { forwarding: 'chain' })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      const plan = { at: 20, hop: 1, fault: (n: LocalNode) => n.kill() }
      const { tokens, result, victim: killed, route } = await generateWithFault(client, events, nodes, plan)
      expect(route.length).toBe(2)
      expect(tokens).toEqual(ref.generated_tokens)
      const { report } = result
      expect(report.forwarding).toBe('chain')
      expect(report.routes.at(-1)!.map((h) => h.peerId)).not.toContain(killed!.peerId)
      expect(report.excludedPeers).toEqual([killed!.peerId])
      // issue #17: the first hop survived and saw the session id of both routes; the second is
      // fresh randomness, not derivable from the first (ids were `${uuid}.${n}`: a hop that saw
      // one could pre-open the next on the replacement peer)
      const ids = events.filter((e) => e.event === 'route').map((e) => e.hopSessionId as string)
      expect(ids.length).toBeGreaterThanOrEqual(2)
      const survivor = nodes.find((n) => n.peerId === route[0].peerId)!
      const seen = survivor.logs.filter((l) => l.includes('"session-open"')).map((l) => JSON.parse(l).sessionId as string)
      expect(seen).toEqual(expect.arrayContaining(ids.slice(0, 2)))
      expectUnrelatedIds(ids)
    } finally {
      await client.close()
    }
  })
})
