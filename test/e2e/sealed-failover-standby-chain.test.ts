/**
 * Issue 6 part 4b, standbys in chained forwarding, on an f16 wire: the route is A[1,2) → B[2,4)
 * chained; the client keeps a standby chain A'[1,2) → B'[2,4) (opened wired to each other) fed
 * with sealed deltas. A fifth peer F serves [1,4) but accepts only f32 wire: it sorts first among
 * the peers covering [2,4), and must never be picked as a standby, since a standby runs the
 * chain's negotiated dtype (f16). SIGKILL the route's last hop at token 40 of 64: the standby
 * chain becomes the route with its KV in place, few rows are replayed, tokens do not change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { createFaultClient, generateWithFault, startSpans } from '../helpers/fault.js'
import { loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const EVERY = 8

describe('chained failover to a standby chain fed with sealed deltas, f16 wire', () => {
  const nodes: LocalNode[] = []
  let f32Only: LocalNode

  beforeAll(async () => {
    nodes.push(...(await startSpans(['1:2', '1:2', '2:4', '2:4', { layers: '1:4', args: ['--wire', 'f32'] }])))
    f32Only = nodes[4]
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it(`SIGKILL the last hop at token 40 of 64: the standby chain takes over, fed every ${EVERY} positions, identical tokens`, async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createFaultClient(nodes, events, {
      forwarding: 'chain',
      wireDtype: 'f16',
      canaries: false,
      snapshotEvery: EVERY,
      standby: true
    })
    const show = () => JSON.stringify(events.filter((e) => e.event !== 'step'))
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      await new Promise((r) => setTimeout(r, 700)) // every peer announced
      expect(client.view.list().length, 'all five peers known').toBe(5)
      const plan = { at: 40, hop: 1, fault: (n: LocalNode) => n.kill() }
      const { tokens, result, victim, route } = await generateWithFault(client, events, nodes, plan)
      expect(route.length).toBe(2)
      expect(tokens).toEqual(ref.generated_tokens)
      const { report } = result
      expect(report.forwarding).toBe('chain')
      expect(report.failovers).toBeGreaterThanOrEqual(1)
      const failedAt = events.findIndex((e) => e.event === 'failover')
      expect(events[failedAt], show()).toMatchObject({ peerId: victim.peerId })
      const before = events.slice(0, failedAt)
      // one standby per span, neither on the route, both on the chain's f16, never the f32-only peer
      const standbys = [1, 2].map((start) =>
        before.filter((e) => e.event === 'standby' && (e.span as number[])[0] === start).at(-1)
      )
      for (const s of standbys) {
        expect(s, show()).toBeDefined()
        expect(s!.wire).toBe('f16')
        expect(route.map((h) => h.peerId)).not.toContain(s!.peerId)
      }
      expect(
        events.some((e) => String(e.event).startsWith('standby') && e.peerId === f32Only.peerId),
        show()
      ).toBe(false)
      expect(
        events.some((e) => e.event === 'standby-failed'),
        show()
      ).toBe(false)
      // each standby imported the first snapshot, then deltas, up to the last capture
      const lastFed = standbys.map((s) => {
        const fed = before.filter((e) => e.event === 'standby-fed' && e.peerId === s!.peerId)
        expect(fed.length, show()).toBeGreaterThanOrEqual(2)
        return fed.at(-1)!.positions as number
      })
      expect(lastFed[0]).toBe(lastFed[1])
      expect(lastFed[0]).toBeGreaterThanOrEqual(ref.prompt_tokens.length + 40 - EVERY)
      // the resume: from the standby chain, its KV in place, only the rows after the last delta
      const resume = events.slice(failedAt).find((e) => e.event === 'resume')
      expect(resume, show()).toMatchObject({ from: 'standby', restoredPositions: lastFed[0] })
      expect(resume!.replayedRows as number).toBeLessThan(EVERY)
      expect(
        events.some((e) => e.event === 'replay' || e.event === 'restore'),
        show()
      ).toBe(false)
      // the new route is the standby chain, still on f16
      const newRoute = events.slice(failedAt).find((e) => e.event === 'route')!.route as Array<{ peerId: string; wire: string }>
      expect(newRoute.map((h) => h.peerId)).toEqual(standbys.map((s) => s!.peerId))
      expect(newRoute.map((h) => h.wire)).toEqual(['f16', 'f16'])
      expect(report.routes.at(-1)!.map((h) => h.peerId)).toEqual(standbys.map((s) => s!.peerId))
    } finally {
      await client.close()
    }
  })
})
