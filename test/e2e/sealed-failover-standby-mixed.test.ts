/**
 * Issue 6 part 4b, mixed takeover in relay forwarding: the route is A[1,2) → B[2,4); a second
 * peer serves [1,2), so that span has a standby fed with sealed deltas, and nobody else serves
 * [2,4), so that span has none. SIGKILL A at token 40 of 64: the standby takes over [1,2) with
 * its KV in place, [2,4) gets a new session (on B, the only peer serving it) restored from the
 * sealed deltas the client kept, and only the rows after the last delta are replayed. The
 * generated tokens must not change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { createFaultClient, generateWithFault, startSpans } from '../helpers/fault.js'
import { loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const EVERY = 8

describe('relayed failover: a standby where fed, client-kept snapshots elsewhere', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    nodes.push(...(await startSpans(['1:2', '1:2', '2:4'])))
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it(`SIGKILL the first hop at token 40 of 64: its standby takes over, the second span restores from snapshots every ${EVERY}`, async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createFaultClient(nodes, events, {
      kvPath: 'client', // the second span restores from client-kept snapshots (issue #41: the node path keeps none)
      forwarding: 'relay',
      canaries: false,
      snapshotEvery: EVERY,
      standby: true
    })
    const show = () => JSON.stringify(events.filter((e) => e.event !== 'step'))
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      await new Promise((r) => setTimeout(r, 700)) // every peer announced
      const { tokens, result, victim, route } = await generateWithFault(client, events, nodes, {
        at: 40,
        hop: 0,
        fault: (n) => n.kill()
      })
      expect(route.length).toBe(2)
      expect(tokens).toEqual(ref.generated_tokens)
      const { report } = result
      expect(report.failovers).toBeGreaterThanOrEqual(1)
      const failedAt = events.findIndex((e) => e.event === 'failover')
      expect(events[failedAt], show()).toMatchObject({ peerId: victim.peerId })
      const before = events.slice(0, failedAt)
      // [1, 2) had a fed standby, [2, 4) none
      const standby = before.filter((e) => e.event === 'standby').at(-1)
      expect(standby, show()).toMatchObject({ span: [1, 2] })
      expect(standby!.peerId).not.toBe(victim.peerId)
      expect(
        before.some((e) => e.event === 'standby-unavailable' && (e.span as number[])[0] === 2),
        show()
      ).toBe(true)
      const lastFed = before.filter((e) => e.event === 'standby-fed' && e.peerId === standby!.peerId).at(-1)!.positions as number
      expect(lastFed).toBeGreaterThanOrEqual(ref.prompt_tokens.length + 40 - EVERY)
      const after = events.slice(failedAt)
      // the new route: the standby for [1, 2), a new session on B for [2, 4)
      const newRoute = after.find((e) => e.event === 'route')!.route as Array<{ peerId: string; start: number; end: number }>
      expect(newRoute.map((h) => [h.peerId, h.start, h.end])).toEqual([
        [standby!.peerId, 1, 2],
        [route[1].peerId, 2, 4]
      ])
      // only [2, 4) imported snapshots at failure time, up to the standby's position
      const restores = after.filter((e) => e.event === 'restore')
      expect(restores, show()).toHaveLength(1)
      expect(restores[0]).toMatchObject({ peerId: route[1].peerId, fromSnapshot: lastFed })
      const resume = after.find((e) => e.event === 'resume')
      expect(resume, show()).toMatchObject({ from: 'mixed', restoredPositions: lastFed })
      expect(resume!.replayedRows as number).toBeLessThan(EVERY)
      expect(
        events.some((e) => e.event === 'replay' || e.event === 'standby-skipped'),
        show()
      ).toBe(false)
    } finally {
      await client.close()
    }
  })
})
