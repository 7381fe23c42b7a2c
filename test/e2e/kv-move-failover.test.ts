/**
 * Issue #41: standbys fed node to node under the client's grants. Separate node processes, real
 * libp2p: the live hop seals each delta and sends it straight to the standby on
 * /layerswarm/kv-move; the client sends grants and checks receipts. SIGKILL the serving peer: the
 * standby takes over, the tokens equal one process's, and the client's link carried no KV (its
 * count of sealed bytes received and sent is 0). The client-kept path (`kvPath: 'client'`) still
 * works and does carry the KV.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { createFaultClient, generateWithFault, startSpans } from '../helpers/fault.js'
import { loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const EVERY = 8

async function failover(
  nodes: readonly LocalNode[],
  init: Record<string, unknown>,
  hop: number
): Promise<{ events: Array<Record<string, unknown>>; show: () => string }> {
  const events: Array<Record<string, unknown>> = []
  const client = await createFaultClient(nodes, events, { snapshotEvery: EVERY, standby: true, canaries: false, ...init })
  const show = () => JSON.stringify(events.filter((e) => e.event !== 'step'))
  try {
    await client.view.waitForRoute(1, 4, 20_000)
    await new Promise((r) => setTimeout(r, 700)) // every peer announced
    const { tokens, result } = await generateWithFault(client, events, nodes, { at: 40, hop, fault: (n) => n.kill() })
    expect(tokens).toEqual(ref.generated_tokens)
    expect(result.report.failovers, show()).toBeGreaterThanOrEqual(1)
  } finally {
    await client.close()
  }
  return { events, show }
}

function checkNodePath(events: Array<Record<string, unknown>>, show: () => string): void {
  const failedAt = events.findIndex((e) => e.event === 'failover')
  const fed = events.slice(0, failedAt).filter((e) => e.event === 'standby-fed')
  expect(fed.length, show()).toBeGreaterThanOrEqual(2)
  expect(
    fed.every((e) => e.path === 'node' && (e.bytes as number) > 0),
    show()
  ).toBe(true)
  expect(
    events.slice(failedAt).find((e) => e.event === 'resume'),
    show()
  ).toMatchObject({ from: 'standby' })
  const bytes = events.filter((e) => e.event === 'kv-client-bytes')
  expect(bytes.length, show()).toBeGreaterThanOrEqual(1)
  for (const b of bytes) expect(b, show()).toMatchObject({ path: 'node', received: 0, sent: 0 })
}

describe('KV moved node to node: relayed failover to a standby fed by the live peer', () => {
  const nodes: LocalNode[] = []
  beforeAll(async () => {
    nodes.push(...(await startSpans(['1:4', '1:4', '1:4', '1:4'])))
  })
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('node path: the standby takes over, identical tokens, 0 KV bytes through the client', async () => {
    const { events, show } = await failover(nodes, { forwarding: 'relay' }, 0)
    checkNodePath(events, show)
  })

  it('client path (kvPath client): identical tokens, the sealed KV went through the client', async () => {
    const live = nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null)
    const { events, show } = await failover(live, { forwarding: 'relay', kvPath: 'client' }, 0)
    const bytes = events.filter((e) => e.event === 'kv-client-bytes')
    expect(bytes.length, show()).toBeGreaterThanOrEqual(1)
    expect(
      bytes.some((b) => b.path === 'client' && (b.received as number) > 0 && (b.sent as number) > 0),
      show()
    ).toBe(true)
    expect(events.some((e) => e.event === 'standby-fed' && e.path === 'node')).toBe(false)
  })
})

describe('KV moved node to node: chained failover to a standby chain fed by the live chain', () => {
  const nodes: LocalNode[] = []
  beforeAll(async () => {
    // a fifth peer, so the route after the takeover has a standby for every span too
    nodes.push(...(await startSpans(['1:2', '1:2', '2:4', '2:4', '2:4'])))
  })
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('node path: the standby chain takes over, identical tokens, 0 KV bytes through the client', async () => {
    const { events, show } = await failover(nodes, { forwarding: 'chain' }, 1)
    checkNodePath(events, show)
    // issue #39: the live chain and the standby chain that took over each have an id per hop
    // (the standbys were opened with their neighbours' ids, client/recovery/standby.ts); no id twice
    const routes = events.filter((e) => e.event === 'route').map((e) => e.hopSessionIds as string[])
    expect(routes.length, show()).toBeGreaterThanOrEqual(2)
    for (const ids of routes) expect(ids.length, show()).toBeGreaterThanOrEqual(2)
    const all = routes.flat()
    expect(new Set(all).size, show()).toBe(all.length)
  })
})
