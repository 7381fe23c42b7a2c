/**
 * `npm run bench -- scale --peers N --clients M --churn R` (issue #38): a swarm of N simulated
 * peers (bench/scale-peer.ts: real hosts on loopback TCP with the node's announcement code and
 * tiny spans, all in this process) and M clients running the real SwarmView and route planner.
 * Measures:
 * - coverageMs: from a new client's start until its view covers every block (each client starts
 *   with one random bootstrap address);
 * - announcement traffic: signed-announcement bytes and messages each peer receives over gossip,
 *   per minute;
 * - route quality: the cost (client/route.ts hopCostMs, compute only) of the route each client
 *   plans, over the best route the full swarm allows (1 = optimal);
 * - generations: route, then one `info` round trip per hop (the step stands in for a forward
 *   pass), a failed hop banned and the route re-planned once, as the client's failover does;
 *   failed: both tries failed;
 * - noticeMs: under churn (R % of the peers replaced per minute, each by a fresh peer on the same
 *   span), time from a peer's death until a client that had it in its view drops it.
 * And memory: RSS per simulated peer. Prints one JSON object. Announce interval: `node start`'s
 * default (5 s, --interval-ms); peers also pull their neighbours' announcements, as nodes do.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { SwarmView } from '../client/index.js'
import { hopCostMs, planRoute, type RouteCandidate } from '../client/routing/route.js'
import { createHost, fetchInfo, type Host } from '../protocol/index.js'
import { benchArgs } from './options.js'
import { SCALE_MODEL_ID, type SimPeer, startSimPeer } from './scale-peer.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const q = (xs: number[], p: number): number | null =>
  xs.length === 0 ? null : [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]
const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10

interface Client {
  host: Host
  view: SwarmView
  coverageMs: number | null
  quality: number[]
}

interface Opts {
  peers: number
  clients: number
  churnPctPerMin: number
  blocks: number
  intervalMs: number
  durationMs: number
  links: number
  refreshMs: number
  coverageTimeoutMs: number
}

export async function runScale(o: Opts): Promise<Record<string, unknown>> {
  const live = new Map<string, SimPeer>()
  // spans spread over the model so that the N peers cover it (also when N < blocks), 1-4 blocks longer than needed
  const spanOf = (i: number) => {
    const start = Math.floor(((i % o.peers) * o.blocks) / o.peers)
    return { start, end: Math.min(o.blocks, start + Math.ceil(o.blocks / o.peers) + ((i * 7) % 4)) }
  }
  const randomLive = (k: number): string[] => {
    const all = [...live.values()]
    const out = new Set<string>()
    for (let i = 0; i < Math.min(k, all.length) * 3 && out.size < Math.min(k, all.length); i++)
      out.add(all[Math.floor(Math.random() * all.length)].addr)
    return [...out]
  }
  const spawn = async (i: number, span = spanOf(i)) => {
    const p = await startSimPeer({
      bootstrap: randomLive(o.links),
      ...span,
      nBlocks: o.blocks,
      throughput: 20 + Math.round(Math.random() * 180),
      intervalMs: o.intervalMs
    })
    live.set(p.peerId, p)
    return p
  }
  global.gc?.()
  const rss0 = process.memoryUsage().rss
  const t0 = performance.now()
  // a few at a time: the first ones alone, so later peers have several to bootstrap to
  for (let i = 0; i < o.peers; ) {
    const batch = Math.min(i < 8 ? 1 : 8, o.peers - i)
    await Promise.all(Array.from({ length: batch }, (_, k) => spawn(i + k)))
    i += batch
  }
  const startupMs = Math.round(performance.now() - t0)
  global.gc?.()
  const rss1 = process.memoryUsage().rss
  // gossip spreads in one interval; a client that starts now sees the swarm as a newcomer would
  await sleep(o.intervalMs)
  const traffic0 = new Map([...live].map(([id, p]) => [id, { ...p.received }]))
  const phase0 = performance.now()

  const truth = (): RouteCandidate[] =>
    [...live.values()].map((p) => ({ peerId: p.peerId, start: p.start, end: p.end, throughput: p.throughput, rttMs: 0 }))
  const cost = (hops: Array<{ peerId: string; start: number; end: number }>, all: Map<string, RouteCandidate>) =>
    hops.reduce(
      (s, h) =>
        s + hopCostMs(all.get(h.peerId) ?? { peerId: '', start: h.start, end: h.end, throughput: 0, rttMs: 0 }, h.start, h.end),
      0
    )

  const clients: Client[] = await Promise.all(
    Array.from({ length: o.clients }, async () => {
      const c0 = performance.now()
      const host = await createHost({ listen: [] })
      const view = new SwarmView(host, SCALE_MODEL_ID, randomLive(1))
      const client: Client = { host, view, coverageMs: null, quality: [] }
      while (performance.now() - c0 < o.coverageTimeoutMs) {
        await view.refresh().catch(() => {})
        if (view.coveredBlocks(0, o.blocks).length === o.blocks) {
          client.coverageMs = Math.round(performance.now() - c0)
          break
        }
        await sleep(200)
      }
      return client
    })
  )

  // churn: replace R % of the peers per minute, each by a fresh peer on the same span
  const killedAt = new Map<string, number>()
  const knewDead = new Map<string, Set<Client>>()
  const noticeMs: number[] = []
  let replaced = 0
  let next = o.peers
  const churnEveryMs = o.churnPctPerMin > 0 ? 60_000 / ((o.churnPctPerMin / 100) * o.peers) : 0
  let stopping = false
  const churn = (async () => {
    while (churnEveryMs > 0 && !stopping) {
      await sleep(churnEveryMs)
      if (stopping) break
      const victims = [...live.values()]
      const v = victims[Math.floor(Math.random() * victims.length)]
      live.delete(v.peerId)
      knewDead.set(v.peerId, new Set(clients.filter((c) => c.view.list().some((p) => p.peerId === v.peerId))))
      killedAt.set(v.peerId, performance.now())
      await v.stop()
      replaced++
      await spawn(next++, { start: v.start, end: v.end })
    }
  })()

  let attempts = 0
  let failed = 0
  let retried = 0
  let noRoute = 0
  const generate = async (c: Client): Promise<boolean> => {
    for (let attempt = 0; attempt < 2; attempt++) {
      let hops: ReturnType<SwarmView['route']>
      try {
        hops = c.view.route(0, o.blocks)
      } catch {
        if (attempt === 1) noRoute++
        await c.view.refresh().catch(() => {})
        continue
      }
      const all = new Map(truth().map((t) => [t.peerId, t]))
      const best = cost(planRoute(truth(), 0, o.blocks), all)
      c.quality.push(cost(hops, all) / best)
      let bad: string | undefined
      for (const h of hops) {
        try {
          await fetchInfo(
            c.host,
            h.addrs.map((x) => multiaddr(x)),
            { signal: AbortSignal.timeout(5_000) }
          )
        } catch {
          bad = h.peerId
          break
        }
      }
      if (bad === undefined) return true
      c.view.ban(bad, 60_000)
      if (attempt === 0) retried++
      await c.view.refresh().catch(() => {})
    }
    return false
  }
  await Promise.all(
    clients.map(async (c) => {
      // each client generates for durationMs from the end of its coverage wait
      const c1 = performance.now()
      while (performance.now() - c1 < o.durationMs) {
        attempts++
        if (!(await generate(c))) failed++
        await sleep(o.refreshMs)
        await c.view.refresh().catch(() => {})
        const ids = new Set(c.view.list().map((p) => p.peerId))
        for (const [dead, knew] of knewDead) {
          if (!knew.has(c) || ids.has(dead)) continue
          knew.delete(c)
          noticeMs.push(Math.round(performance.now() - killedAt.get(dead)!))
        }
      }
    })
  )
  stopping = true
  await churn
  const minutes = (performance.now() - phase0) / 60_000
  const steady = [...live].filter(([id]) => traffic0.has(id))
  const perMin = (f: (id: string, p: SimPeer) => number) =>
    steady.length === 0 ? null : Math.round(steady.reduce((s, [id, p]) => s + f(id, p), 0) / steady.length / minutes)
  const viewSizes = clients.map((c) => c.view.list().length)
  const quality = clients.flatMap((c) => c.quality)
  const coverage = clients.map((c) => c.coverageMs)
  const result = {
    bench: 'scale',
    peers: o.peers,
    clients: o.clients,
    churnPctPerMin: o.churnPctPerMin,
    blocks: o.blocks,
    intervalMs: o.intervalMs,
    durationMs: o.durationMs,
    startupMs,
    memory: { rssBeforeMiB: mib(rss0), rssWithPeersMiB: mib(rss1), perPeerKiB: Math.round((rss1 - rss0) / o.peers / 1024) },
    coverage: {
      allCovered: coverage.every((x) => x !== null),
      p50Ms: q(
        coverage.filter((x): x is number => x !== null),
        0.5
      ),
      maxMs: coverage.some((x) => x === null) ? null : Math.max(...(coverage as number[]))
    },
    viewPeers: { min: Math.min(...viewSizes), max: Math.max(...viewSizes), live: live.size },
    announcements: {
      bytesPerNodePerMin: perMin((id, p) => p.received.bytes - traffic0.get(id)!.bytes),
      messagesPerNodePerMin: perMin((id, p) => p.received.messages - traffic0.get(id)!.messages)
    },
    routeQuality: {
      p50: round3(q(quality, 0.5)),
      p95: round3(q(quality, 0.95)),
      max: round3(quality.length ? Math.max(...quality) : null)
    },
    generations: {
      attempts,
      failed,
      failedPct: attempts ? Math.round((failed / attempts) * 10_000) / 100 : 0,
      failedNoRoute: noRoute,
      retried
    },
    churn: {
      replaced,
      noticeMs: {
        pairs: noticeMs.length,
        p50: q(noticeMs, 0.5),
        p95: q(noticeMs, 0.95),
        max: noticeMs.length ? Math.max(...noticeMs) : null
      }
    }
  }
  await Promise.allSettled([...clients.map((c) => c.host.stop()), ...[...live.values()].map((p) => p.stop())])
  return result
}

const round3 = (x: number | null) => (x === null ? null : Math.round(x * 1000) / 1000)

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, {
    peers: '100',
    clients: '20',
    churn: '0',
    blocks: '32',
    'interval-ms': '5000',
    'duration-ms': '60000',
    links: '3',
    'refresh-ms': '2000',
    'coverage-timeout-ms': '60000'
  })
  const result = await runScale({
    peers: a.int('peers', 2),
    clients: a.int('clients', 1),
    churnPctPerMin: a.number('churn', 0, false),
    blocks: a.int('blocks', 2),
    intervalMs: a.int('interval-ms', 100),
    durationMs: a.int('duration-ms', 1_000),
    links: a.int('links', 1),
    refreshMs: a.int('refresh-ms', 100),
    coverageTimeoutMs: a.int('coverage-timeout-ms', 1_000)
  })
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
}
