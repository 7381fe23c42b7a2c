/**
 * Issue 6 part 4b, standby: with `snapshotEvery` and `standby`, a peer serving the span but not
 * on the route imports every sealed delta the live hop exports; when the live peer is killed it
 * becomes the route with its KV in place, so only the positions after the last delta are
 * replayed and no snapshot moves at failure time. The generated tokens must not change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { createFaultClient, generateWithFault, startSpans } from '../helpers/fault.js'
import { loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const EVERY = 8

describe('failover to a standby fed with sealed deltas', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    // Three peers serve the same span [1, 4): the route, its standby, and one more.
    nodes.push(...(await startSpans(['1:4', '1:4', '1:4'])))
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it(`SIGKILL the serving peer at token 40 of 64: the standby takes over, fed every ${EVERY} positions, identical tokens`, async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createFaultClient(nodes, events, { snapshotEvery: EVERY, standby: true })
    const show = () => JSON.stringify(events.filter((e) => e.event !== 'step'))
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      await new Promise((r) => setTimeout(r, 700)) // every peer announced
      const { tokens, result, victim } = await generateWithFault(client, events, nodes, { at: 40, fault: (n) => n.kill() })
      expect(tokens).toEqual(ref.generated_tokens)
      const { report } = result
      expect(report.failovers).toBeGreaterThanOrEqual(1)
      const failedAt = events.findIndex((e) => e.event === 'failover')
      expect(events[failedAt], show()).toMatchObject({ peerId: victim.peerId })
      // the standby that was fed before the kill
      const before = events.slice(0, failedAt)
      const standby = before.filter((e) => e.event === 'standby').at(-1)
      expect(standby, show()).toBeDefined()
      expect(standby!.peerId).not.toBe(victim.peerId)
      const fed = before.filter((e) => e.event === 'standby-fed' && e.peerId === standby!.peerId)
      expect(fed.length, show()).toBeGreaterThanOrEqual(2) // the first snapshot, then deltas
      const lastFed = fed.at(-1)!.positions as number
      expect(lastFed).toBeGreaterThanOrEqual(ref.prompt_tokens.length + 40 - EVERY)
      // the resume: from the standby, its KV in place, only the rows after the last delta
      const resume = events.slice(failedAt).find((e) => e.event === 'resume')
      expect(resume, show()).toMatchObject({ from: 'standby', restoredPositions: lastFed })
      expect(resume!.replayedRows as number).toBeLessThan(EVERY)
      expect(resume!.replayedRows as number).toBeLessThan(40)
      expect(report.routes.at(-1)![0].peerId).toBe(standby!.peerId)
      // no full replay and no snapshot imported at failure time
      expect(
        events.some((e) => e.event === 'replay'),
        show()
      ).toBe(false)
      expect(
        events.some((e) => e.event === 'restore'),
        show()
      ).toBe(false)
      // after the takeover, the third peer became the new route's standby
      const after = events.slice(failedAt)
      expect(
        after.some((e) => e.event === 'standby-fed' && e.peerId !== standby!.peerId && e.peerId !== victim.peerId),
        show()
      ).toBe(true)
    } finally {
      await client.close()
    }
  })
})
