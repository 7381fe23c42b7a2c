import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import type { PeerRecord } from '../../client/index.js'
import { reachabilityOf } from '../../protocol/index.js'
import { DEFAULT_STATUS_REFRESH_MS } from '../options.js'
import { packageRoot } from '../paths.js'
import type { GatewayContext } from './generation.js'

/** The page's files: plain HTML, CSS and JS, no build step. */
export const STATIC_FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/status.css': { file: 'status.css', type: 'text/css; charset=utf-8' },
  '/status-grid.css': { file: 'status-grid.css', type: 'text/css; charset=utf-8' },
  '/status.js': { file: 'status.js', type: 'text/javascript; charset=utf-8' },
  // Browsers ask for /favicon.ico whatever the page links (the chat page links none): the page's
  // icon, as SVG, instead of a 404 in every log (issue 31).
  '/favicon.ico': { file: 'favicon.svg', type: 'image/svg+xml' }
}

export function staticDir(): string {
  return join(packageRoot(), 'node', 'gateway', 'static')
}

/** Blocks with no peer, as [start, end) ranges. */
export function coverageGaps(counts: readonly number[], from: number, to: number): Array<[number, number]> {
  const gaps: Array<[number, number]> = []
  for (let b = from; b < to; b++) {
    if (counts[b] > 0) continue
    const last = gaps[gaps.length - 1]
    if (last && last[1] === b) last[1] = b + 1
    else gaps.push([b, b + 1])
  }
  return gaps
}

export interface StatusInit {
  readonly ctx: GatewayContext
  readonly modelName: string
  /** Where the gateway listens (known once it is bound). */
  readonly listen: () => string
  readonly auth: boolean
  /** Least time between swarm refreshes, however often the page polls (default 2 s). */
  readonly refreshMs?: number
}

/** `/status.json` (what the page polls) and the page itself. */
export function registerStatus(app: FastifyInstance, init: StatusInit): void {
  const { ctx } = init
  const refreshMs = init.refreshMs ?? DEFAULT_STATUS_REFRESH_MS
  let peers: PeerRecord[] = []
  let refreshedAt = 0
  let refreshError: string | undefined
  let inflight: Promise<void> | undefined
  // Several open pages share one refresh; a refresh queries every peer's info.
  const refresh = (): Promise<void> => {
    if (Date.now() - refreshedAt < refreshMs) return Promise.resolve()
    inflight ??= ctx.client
      .swarm({ signal: AbortSignal.timeout(8_000) })
      .then(
        (list) => {
          peers = list
          refreshError = undefined
        },
        (err: Error) => {
          refreshError = err.message
        }
      )
      .finally(() => {
        refreshedAt = Date.now()
        inflight = undefined
      })
    return inflight
  }

  app.get('/status.json', async (_req, reply) => {
    await refresh()
    reply.header('cache-control', 'no-store')
    return statusJson(init, peers, refreshedAt, refreshError)
  })

  for (const [path, { file, type }] of Object.entries(STATIC_FILES)) {
    app.get(path, async (_req, reply) => {
      // Read per request: the files are small, and editing the page needs no restart.
      const body = readFileSync(join(staticDir(), file))
      return reply.type(type).header('cache-control', 'no-cache').send(body)
    })
  }
}

function statusJson(init: StatusInit, peers: readonly PeerRecord[], refreshedAt: number, refreshError?: string) {
  const { ctx } = init
  const { client, stats } = ctx
  const nLayers = client.span.last[1]
  const [from, to] = client.span.remote
  const banned = new Set(client.view.bannedPeers())
  const counts = Array.from(
    { length: nLayers },
    (_, b) => peers.filter((p) => p.start <= b && b < p.end && !banned.has(p.peerId)).length
  )
  const now = Date.now()
  return {
    now,
    model: {
      name: init.modelName,
      id: client.modelId,
      blocks: nLayers,
      remote: [from, to],
      edge: { first: client.span.first, last: client.span.last }
    },
    gateway: {
      listen: init.listen(),
      auth: init.auth,
      uptime_s: Math.round((now - stats.startedAt) / 1000),
      max_concurrent: ctx.maxConcurrent
    },
    swarm: { refreshed_at: refreshedAt, error: refreshError ?? null },
    coverage: { peers_per_block: counts, gaps: coverageGaps(counts, from, to) },
    peers: peers.map((p) => {
      const t = stats.trust.get(p.peerId)
      return {
        peer_id: p.peerId,
        addrs: p.addrs,
        start: p.start,
        end: p.end,
        throughput: p.throughput,
        rtt_ms: Math.round(p.rttMs * 10) / 10,
        // how the gateway reaches it now: direct, relayed (circuit relay v2) or hole-punched (DCUtR)
        reachability: reachabilityOf(client.host, p.peerId) ?? null,
        free_cache_tokens: p.freeCacheTokens,
        version: p.version,
        seen_ago_ms: now - p.seenAtMs,
        banned: banned.has(p.peerId),
        routed: stats.routed.get(p.peerId) ?? 0,
        trust: t
          ? { posterior: t.posterior, excluded: t.excluded, observations: t.observations, canaries_sent: t.canariesSent }
          : null
      }
    }),
    // Peers the detector or the route planner excluded that no longer answer are still worth showing.
    excluded: [...new Set([...banned, ...[...stats.trust].filter(([, t]) => t.excluded).map(([id]) => id)])],
    live: {
      sessions: stats.active,
      sessions_total: stats.sessionsTotal,
      tokens_per_second: Math.round(stats.tokensPerSecond(now) * 100) / 100,
      tokens_total: stats.tokensTotal,
      requests_total: stats.requestsTotal,
      errors_total: stats.errorsTotal
    },
    recent: stats.recent.slice(0, 10)
  }
}
