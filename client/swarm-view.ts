import type { PeerId } from '@libp2p/interface'
import { multiaddr } from '@multiformats/multiaddr'
import { type Announcement, type DType, dialBootstrap, fetchInfo, type Host, subscribeAnnouncements } from '../protocol/index.js'
import type { HopTarget } from './hop.js'
import { NoRouteError, planRoute, type RouteCandidate, type RouteHop } from './route.js'
import { acceptedDtypes, planWireRoute, type WirePreference } from './wire-negotiation.js'

/** Wire negotiation for a route: what the client asks for, and whether the route is a chain. */
export interface RouteWire {
  readonly preference: WirePreference
  readonly chained: boolean
}

/** What the client knows of one peer. */
export interface PeerRecord extends RouteCandidate {
  readonly addrs: string[]
  readonly modelId: string
  readonly freeCacheTokens: number
  readonly version: string
  readonly seenAtMs: number
  /** Wire dtypes the peer accepts. */
  readonly wireDtypes: readonly DType[]
}

/**
 * The client's view of the swarm: peers learned from bootstrap addresses and signed gossipsub
 * announcements, each checked with an `info` request (which also measures its round trip).
 * Peers that failed are banned for a while and left out of routes.
 */
export class SwarmView {
  private readonly peers = new Map<string, PeerRecord>()
  private readonly banned = new Map<string, number>()
  private readonly announced = new Map<string, Announcement>()

  constructor(
    private readonly host: Host,
    private readonly modelId: string | undefined,
    private readonly bootstrap: readonly string[],
    signal?: AbortSignal
  ) {
    if (host.services.pubsub) {
      subscribeAnnouncements(
        host,
        (a) => {
          const prev = this.announced.get(a.peerId)
          if (!prev || prev.issuedAtMs <= a.issuedAtMs) this.announced.set(a.peerId, a)
        },
        signal
      )
    }
  }

  /** Query every known peer's info; drops peers that do not answer. */
  async refresh(signal?: AbortSignal): Promise<void> {
    await dialBootstrap(this.host, [...this.bootstrap], signal)
    const targets = new Map<string, { id?: PeerId; addrs: string[] }>()
    for (const p of this.host.getPeers())
      targets.set(p.toString(), { id: p, addrs: this.host.getConnections(p).map((c) => c.remoteAddr.toString()) })
    for (const a of this.announced.values()) {
      if (a.expiresAtMs < Date.now()) continue
      if (!targets.has(a.peerId))
        targets.set(a.peerId, { addrs: a.addrs.map((x) => (x.includes('/p2p/') ? x : `${x}/p2p/${a.peerId}`)) })
    }
    for (const id of targets.keys()) if (this.isBanned(id)) targets.delete(id) // a stalled peer would hold up the refresh
    await Promise.all(
      [...targets].map(async ([id, t]) => {
        try {
          const target = t.id ?? t.addrs.map((x) => multiaddr(x))
          const { info, rttMs } = await fetchInfo(
            this.host,
            target,
            AbortSignal.any([AbortSignal.timeout(5_000), ...(signal ? [signal] : [])])
          )
          if (this.modelId !== undefined && info.modelId !== this.modelId) return
          const addrs = t.addrs.length > 0 ? t.addrs : this.host.getConnections(t.id!).map((c) => c.remoteAddr.toString())
          this.peers.set(id, {
            peerId: id,
            addrs: addrs.map((x) => (x.includes('/p2p/') ? x : `${x}/p2p/${id}`)),
            modelId: info.modelId,
            start: info.start,
            end: info.end,
            throughput: info.throughput,
            rttMs,
            freeCacheTokens: info.freeCacheTokens,
            version: info.version,
            seenAtMs: Date.now(),
            wireDtypes: acceptedDtypes(info.wireDtypes)
          })
        } catch {
          this.peers.delete(id)
        }
      })
    )
  }

  list(): PeerRecord[] {
    return [...this.peers.values()].sort((a, b) => a.start - b.start || a.end - b.end || a.peerId.localeCompare(b.peerId))
  }

  /** Keep a peer out of routes for `ms` (a longer ban already in place stays). */
  ban(peerId: string, ms: number): void {
    this.banned.set(peerId, Math.max(this.banned.get(peerId) ?? 0, Date.now() + ms))
  }

  /** Peers banned now. */
  bannedPeers(): string[] {
    return [...this.banned.keys()].filter((id) => this.isBanned(id))
  }

  isBanned(peerId: string): boolean {
    const until = this.banned.get(peerId)
    return until !== undefined && until > Date.now()
  }

  /**
   * A route over [from, to) on peers not banned, with their addresses and wire dtypes. With
   * `wire`, only peers that accept the requested dtype, and each hop gets its negotiated dtype
   * (a chain one dtype all its hops accept); UnsupportedWireError when only the dtype is missing.
   */
  route(from: number, to: number, wire?: RouteWire): HopTarget[] {
    const candidates = this.list().filter((p) => !this.isBanned(p.peerId))
    if (!wire) return planRoute(candidates, from, to).map((h) => this.target(h))
    return planWireRoute(candidates, from, to, wire.preference, wire.chained).map((h) => ({
      ...this.target(h),
      wireDtype: h.wireDtype
    }))
  }

  private target(h: RouteHop): HopTarget {
    const p = this.peers.get(h.peerId)!
    return { ...h, addrs: p.addrs, wireDtypes: p.wireDtypes }
  }

  /** Refresh until a route exists (announcements take a moment to arrive), or throw NoRouteError. */
  async waitForRoute(from: number, to: number, timeoutMs: number, signal?: AbortSignal, wire?: RouteWire): Promise<HopTarget[]> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      await this.refresh(signal)
      try {
        return this.route(from, to, wire)
      } catch (err) {
        if (!(err instanceof NoRouteError) || Date.now() > deadline) throw err
      }
      await new Promise((r) => setTimeout(r, 300))
      signal?.throwIfAborted()
    }
  }
}
