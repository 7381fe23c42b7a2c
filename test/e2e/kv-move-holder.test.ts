/**
 * Issue #41 item 3, no standby: "the replacement imports from the standby or from a peer holding
 * sealed snapshots, under a fresh grant". Separate node processes, real libp2p. The client asks
 * for sealed snapshots (snapshotEvery) and no standby; on the node path each span of the route
 * gets a holder (a peer that does not serve that span), which the live hop feeds its sealed
 * deltas node to node. SIGKILL the serving hop: the client opens a session on a fresh peer for
 * the span, grants the holder a move, and the holder forwards the sealed KV straight to it. The
 * tokens equal one process's, only the rows after the last delta are replayed, and the client's
 * link carried no KV (its count of sealed bytes received and sent is 0).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { createFaultClient, generateWithFault, startSpans } from '../helpers/fault.js'
import { loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const EVERY = 8

async function failover(nodes: readonly LocalNode[], forwarding: 'relay' | 'chain') {
  const events: Array<Record<string, unknown>> = []
  const client = await createFaultClient(nodes, events, { snapshotEvery: EVERY, standby: false, canaries: false, forwarding })
  const show = () => JSON.stringify(events.filter((e) => e.event !== 'step'))
  try {
    await client.view.waitForRoute(1, 4, 20_000)
    await new Promise((r) => setTimeout(r, 700)) // every peer announced
    const run = await generateWithFault(client, events, nodes, { at: 40, hop: 0, fault: (n) => n.kill() })
    expect(run.tokens).toEqual(ref.generated_tokens)
    expect(run.result.report.failovers, show()).toBeGreaterThanOrEqual(1)
    return { ...run, events, show }
  } finally {
    await client.close()
  }
}

/** Every hop of the new route restored from a holder, none from the client, and no KV byte through the client. */
function checkHolders(r: Awaited<ReturnType<typeof failover>>): void {
  const { events, show, victim } = r
  const failedAt = events.findIndex((e) => e.event === 'failover')
  const before = events.slice(0, failedAt)
  const after = events.slice(failedAt)
  expect(
    before.some((e) => e.event === 'standby' || e.event === 'standby-fed'),
    show()
  ).toBe(false)
  const fed = before.filter((e) => e.event === 'holder-fed')
  expect(fed.length, show()).toBeGreaterThanOrEqual(2)
  expect(fed.every((e) => (e.bytes as number) > 0 && e.peerId !== victim.peerId)).toBe(true)
  const route = after.find((e) => e.event === 'route')!.route as Array<{ peerId: string; start: number; end: number }>
  expect(route.some((h) => h.peerId === victim.peerId)).toBe(false)
  const restores = after.filter((e) => e.event === 'restore')
  expect(restores.length, show()).toBe(route.length)
  for (const h of route) {
    const holder = before.filter((e) => e.event === 'holder' && (e.span as number[])[0] === h.start).at(-1)
    // the replacement is not the holder: a holder never serves the span it holds
    expect(holder?.peerId, show()).not.toBe(h.peerId)
    const lastFed = fed.filter((e) => e.peerId === holder!.peerId && (e.span as number[])[0] === h.start).at(-1)!
    expect(
      restores.find((e) => e.peerId === h.peerId),
      show()
    ).toMatchObject({ from: 'holder', fromSnapshot: lastFed.positions })
  }
  const resume = after.find((e) => e.event === 'resume')
  expect(resume, show()).toMatchObject({ from: 'snapshot' })
  expect(resume!.replayedRows as number).toBeLessThan(EVERY)
  expect(
    events.some((e) => e.event === 'replay'),
    show()
  ).toBe(false)
  const bytes = events.filter((e) => e.event === 'kv-client-bytes')
  expect(bytes.length, show()).toBeGreaterThanOrEqual(1)
  for (const b of bytes) expect(b, show()).toMatchObject({ path: 'node', received: 0, sent: 0 })
}

describe('KV moved node to node without a standby: a holder feeds the fresh replacement', () => {
  describe('relay', () => {
    const nodes: LocalNode[] = []
    beforeAll(async () => {
      // [1, 4) twice (the route and the fresh peer that replaces it), and [1, 2): the holder
      nodes.push(...(await startSpans(['1:4', '1:4', '1:2'])))
    })
    afterAll(async () => {
      await Promise.all(nodes.map((n) => n.stop()))
    })

    it('SIGKILL the hop: the fresh peer imports from the holder, identical tokens, 0 KV bytes through the client', async () => {
      const r = await failover(nodes, 'relay')
      checkHolders(r)
      expect(r.events.find((e) => e.event === 'holder')).toMatchObject({ peerId: nodes[2].peerId, span: [1, 4] })
    })
  })

  describe('chain', () => {
    const nodes: LocalNode[] = []
    beforeAll(async () => {
      // A[1,2) → B[2,4), a fresh [1, 2), and [3, 4), which serves neither span whole: holders
      nodes.push(...(await startSpans(['1:2', '2:4', '1:2', '3:4'])))
    })
    afterAll(async () => {
      await Promise.all(nodes.map((n) => n.stop()))
    })

    it('SIGKILL the first hop: both spans of the new chain import from holders, identical tokens, 0 KV bytes through the client', async () => {
      const r = await failover(nodes, 'chain')
      expect(r.route.length).toBe(2)
      checkHolders(r)
    })
  })
})
