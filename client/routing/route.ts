import { NoRouteError } from '../errors.js'
/**
 * Route planning over the swarm view: a chain of peers whose (sub-)spans cover the remote
 * blocks [from, to) exactly, with the least expected time per token. As Petals' routing does,
 * this is a shortest path over block boundaries: an edge a → b exists when a peer serves
 * [s, e) with s ≤ a < b ≤ e, and costs that peer's round trip plus its compute for b - a
 * blocks, plus the wait its queue announces (issue #18: load-aware routes). Dijkstra on ≤ n+1
 * nodes.
 */
export interface RouteCandidate {
  readonly peerId: string
  readonly start: number
  readonly end: number
  /** Measured or announced round trip, ms. */
  readonly rttMs: number
  /** Tokens/s the peer reports for its whole span (decode). */
  readonly throughput: number
  /** Steps waiting in the peer's batch queue, as it last announced (0 or absent: none). */
  readonly queuedSteps?: number
  /**
   * The client's own moving average of ms per block its decode steps took on this peer past the
   * round trip (client/routing/peer-load.ts); replaces the reported throughput once known.
   */
  readonly measuredMsPerBlock?: number
  /** A per-client tie-break fraction (client/routing/peer-load.ts ROUTE_JITTER), so equal replicas share clients. */
  readonly jitter?: number
}

export interface RouteHop {
  readonly peerId: string
  readonly start: number
  readonly end: number
}

/** Assumed ms per block of a peer that reports no throughput. */
const UNKNOWN_MS_PER_BLOCK = 50

/**
 * Expected milliseconds for one token through blocks [a, b) of a peer: its round trip, its
 * compute for b - a blocks (the client's own measure when it has one, else the reported
 * throughput), and one step of its whole span for each step its queue announces waiting
 * (a bound: batching runs waiting steps together), all raised by the client's tie-break.
 */
export function hopCostMs(c: RouteCandidate, a: number, b: number): number {
  const span = Math.max(1, c.end - c.start)
  const reportedMsPerBlock = c.throughput > 0 ? 1000 / c.throughput / span : UNKNOWN_MS_PER_BLOCK
  const perBlockMs = c.measuredMsPerBlock ?? reportedMsPerBlock
  const queueMs = Math.max(0, c.queuedSteps ?? 0) * reportedMsPerBlock * span
  return (c.rttMs + perBlockMs * (b - a) + queueMs) * (1 + Math.max(0, c.jitter ?? 0))
}

export function planRoute(candidates: readonly RouteCandidate[], from: number, to: number): RouteHop[] {
  if (from === to) return []
  if (!(from < to)) throw new NoRouteError(`empty or inverted block range [${from}, ${to})`)
  const dist = new Map<number, number>([[from, 0]])
  const prev = new Map<number, { at: number; hop: RouteHop }>()
  const done = new Set<number>()
  for (;;) {
    let at = -1
    let best = Number.POSITIVE_INFINITY
    for (const [node, d] of dist) if (!done.has(node) && d < best) [at, best] = [node, d]
    if (at < 0) break
    if (at === to) break
    done.add(at)
    for (const c of candidates) {
      if (!(c.start <= at && at < c.end)) continue
      // A peer may serve any sub-span of what it holds: stop at every boundary up to its end.
      for (let b = at + 1; b <= Math.min(c.end, to); b++) {
        const d = best + hopCostMs(c, at, b)
        if (d < (dist.get(b) ?? Number.POSITIVE_INFINITY)) {
          dist.set(b, d)
          prev.set(b, { at, hop: { peerId: c.peerId, start: at, end: b } })
        }
      }
    }
  }
  if (!prev.has(to)) {
    const covered = new Set<number>()
    for (const c of candidates) for (let b = Math.max(c.start, from); b < Math.min(c.end, to); b++) covered.add(b)
    const gaps = []
    for (let b = from; b < to; b++) if (!covered.has(b)) gaps.push(b)
    throw new NoRouteError(
      `no peers cover blocks [${from}, ${to})${gaps.length ? `: nobody serves block(s) ${gaps.join(', ')}` : ''}`
    )
  }
  const hops: RouteHop[] = []
  for (let b = to; b !== from; ) {
    const p = prev.get(b)!
    hops.unshift(p.hop)
    b = p.at
  }
  return mergeAdjacent(hops)
}

/** Consecutive hops on the same peer become one hop (one round trip instead of two). */
function mergeAdjacent(hops: RouteHop[]): RouteHop[] {
  const out: RouteHop[] = []
  for (const h of hops) {
    const last = out[out.length - 1]
    if (last && last.peerId === h.peerId && last.end === h.start) out[out.length - 1] = { ...last, end: h.end }
    else out.push(h)
  }
  return out
}
