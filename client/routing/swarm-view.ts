import type { AbortOptions, PeerId } from '@libp2p/interface'
import { multiaddr } from '@multiformats/multiaddr'
import {
  type Announcement,
  type BootstrapResult,
  type DType,
  dialBootstrap,
  fetchAnnouncements,
  fetchInfo,
  type Host,
  type KvWireDType,
  networkPolicy,
  servingAllowed,
  subscribeAnnouncements
} from '../../protocol/index.js'
import { NoRouteError } from '../errors.js'
import type { HopTarget } from '../session/hop.js'
import { liveTimeout } from '../session/step-deadline.js'
import { acceptedDtypes, planWireRoute, type WirePreference } from '../session/wire-negotiation.js'
import { bootstrapDialError } from './bootstrap-check.js'
import { createDialPolicy, type DialPolicy } from './dial-policy.js'
import { forEachLimited, INFO_CONCURRENCY } from './for-each-limited.js'
import { PeerLoad } from './peer-load.js'
import { planRoute, type RouteCandidate, type RouteHop } from './route.js'
import { explainMissingRoute, type RefreshReport } from './route-explain.js'

export type { RefreshReport }

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
  /** Blocks in the whole model (the peer's InfoResponse.n_layers). */
  readonly nLayers: number
  /** The peer's KV cache dtype (InfoResponse.kv_dtype; canary drift is scored in its class). */
  readonly kvDtype?: KvWireDType
  /** What runs its span (InfoResponse.backend, issue 32): native, wasm, reference, ggml-cpu, ggml-cuda, … */
  readonly backend?: string
  readonly device?: string
  readonly modelName?: string // InfoResponse.model_name: readable, from GGUF metadata (issue 33 item 5)
}

/** Progress while waiting for a route: blocks of [from, to) served by peers seen so far. */
export interface RouteWaitProgress {
  readonly covered: number
  readonly total: number
  readonly peers: number
  readonly elapsedMs: number
}

/** Announcements remembered at once; each refresh asks these peers for their info. */
const MAX_ANNOUNCED_PEERS = 256

/**
 * The client's view of the swarm: peers learned from bootstrap addresses, from the signed
 * announcements the bootstrap peers hold (asked for on every refresh, so discovery does not
 * wait for gossip) and from gossipsub announcements, each checked with an `info` request
 * (which also measures its round trip). Peers that failed are banned for a while and left out
 * of routes.
 */
export class SwarmView {
  private readonly peers = new Map<string, PeerRecord>()
  private readonly banned = new Map<string, number>()
  private readonly announced = new Map<string, Announcement>()
  /** Connected peers whose last info request went unanswered: kept for one refresh more. */
  private readonly missed = new Set<string>()
  /** What the last refresh saw (see RefreshReport). */
  lastRefresh: RefreshReport = { bootstrapFailed: [], bootstrapAnnouncements: [], dialled: [], otherModel: [] }
  /** Called on each round of waitForRoute that found no route yet (the CLI's progress line). */
  onWait?: (p: RouteWaitProgress) => void
  /** This client's own measures of each peer's step times, and its tie-breaks (load-aware routes). */
  readonly load = new PeerLoad()
  /** Which announced addresses this client dials (issue #39 item 5: client/routing/dial-policy.ts). */
  private readonly dialPolicy: DialPolicy

  constructor(
    private readonly host: Host,
    private readonly modelId: string | undefined,
    private readonly bootstrap: readonly string[],
    signal?: AbortSignal
  ) {
    this.dialPolicy = createDialPolicy({ bootstrap })
    if (host.services.pubsub) {
      subscribeAnnouncements(host, (a) => this.learn(a), signal)
    }
  }

  /** Keeps what this client could use, and only so many (issue #17: the map grew forever). */
  private learn(a: Announcement): void {
    if (this.modelId !== undefined && a.modelId !== this.modelId) return
    if (!servingAllowed(networkPolicy(), a.peerId)) return // --allow-serve (issue #38)
    const prev = this.announced.get(a.peerId)
    if (prev && prev.issuedAtMs > a.issuedAtMs) return
    this.announced.delete(a.peerId) // re-inserted last: the map stays in arrival order
    this.announced.set(a.peerId, a)
    this.pruneAnnouncements()
    // a known peer's queue moves with every announcement: routes planned next see it
    const known = this.peers.get(a.peerId)
    if (known) this.peers.set(a.peerId, { ...known, queuedSteps: a.queuedSteps ?? 0 })
  }

  /** Drops expired announcements, then the oldest beyond MAX_ANNOUNCED_PEERS. */
  private pruneAnnouncements(): void {
    const now = Date.now()
    for (const [id, a] of this.announced) if (a.expiresAtMs < now) this.announced.delete(id)
    for (const id of this.announced.keys()) {
      if (this.announced.size <= MAX_ANNOUNCED_PEERS) break
      this.announced.delete(id)
    }
  }

  /** Ask each connected bootstrap peer for the announcements it holds (older peers lack the protocol). */
  private async askBootstrap(boot: BootstrapResult, signal?: AbortSignal): Promise<RefreshReport['bootstrapAnnouncements']> {
    // a banned bootstrap peer is left out, as in the info round: one that stalls (SIGSTOP, a hung
    // process) kept its connection open and held every refresh for the full timeout, so each
    // failover away from it waited that long for its route. Unless all are banned: then they are
    // the only way to the others (announcements are signed by the peers they name, and a banned
    // peer stays out of routes), as for a client whose one bootstrap address is a convicted peer's
    const unbanned = boot.connected.filter((peer) => !this.isBanned(peer.toString()))
    return await Promise.all(
      (unbanned.length > 0 ? unbanned : boot.connected).map(async (peer) => {
        try {
          const list = await fetchAnnouncements(this.host, peer, {
            modelId: this.modelId,
            signal: AbortSignal.any([liveTimeout(5_000), ...(signal ? [signal] : [])])
          })
          for (const { announcement } of list) if (announcement.peerId !== this.host.peerId.toString()) this.learn(announcement)
          return { peerId: peer.toString(), announcements: list.length }
        } catch {
          return { peerId: peer.toString(), announcements: -1 }
        }
      })
    )
  }

  /** Query every known peer's info; drops peers that do not answer. */
  async refresh({ signal }: AbortOptions = {}): Promise<void> {
    const boot = await dialBootstrap(this.host, [...this.bootstrap], { signal })
    const bootstrapAnnouncements = await this.askBootstrap(boot, signal)
    const dialled: RefreshReport['dialled'] = []
    const otherModel: string[] = []
    const targets = new Map<string, { id?: PeerId; addrs: string[] }>()
    for (const p of this.host.getPeers())
      targets.set(p.toString(), { id: p, addrs: this.host.getConnections(p).map((c) => c.remoteAddr.toString()) })
    this.pruneAnnouncements()
    for (const a of this.announced.values()) {
      if (targets.has(a.peerId)) continue
      // a peer with no announced address inside the policy is not dialled at all
      const addrs = this.dialPolicy.filter(a.addrs)
      if (addrs.length > 0) targets.set(a.peerId, { addrs: addrs.map((x) => (x.includes('/p2p/') ? x : `${x}/p2p/${a.peerId}`)) })
    }
    // a stalled peer would hold up the refresh; one off --allow-serve may not serve (issue #38)
    for (const id of targets.keys()) if (this.isBanned(id) || !servingAllowed(networkPolicy(), id)) targets.delete(id)
    // Issue #38 (bench scale): one info request per known peer, all at once, is N handshakes in
    // the same instant; past ~100 peers on a busy host most of them hit the 5 s timeout and the
    // view stayed empty. INFO_CONCURRENCY at a time finishes sooner than all at once.
    await forEachLimited([...targets], INFO_CONCURRENCY, async ([id, t]) => {
      try {
        const target = t.id ?? t.addrs.map((x) => multiaddr(x))
        const { info, rttMs } = await fetchInfo(this.host, target, {
          signal: AbortSignal.any([liveTimeout(5_000), ...(signal ? [signal] : [])])
        })
        dialled.push({ peerId: id, ok: true })
        this.missed.delete(id)
        if (this.modelId !== undefined && info.modelId !== this.modelId) {
          otherModel.push(id)
          this.peers.delete(id)
          return
        }
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
          queuedSteps: info.queuedSteps ?? 0,
          version: info.version,
          seenAtMs: Date.now(),
          wireDtypes: acceptedDtypes(info.wireDtypes),
          nLayers: info.nLayers,
          ...(info.kvDtype ? { kvDtype: info.kvDtype } : {}),
          ...(info.backend ? { backend: info.backend } : {}),
          ...(info.device ? { device: info.device } : {}),
          ...(info.modelName ? { modelName: info.modelName } : {})
        })
      } catch (err) {
        dialled.push({ peerId: id, ok: false, error: (err as Error).message.split('\n')[0] })
        // a peer still connected that answered late stays one refresh more: under load one late
        // reply dropped a live peer and routed around it (issue 31); a closed connection goes now
        const live = t.id !== undefined && this.host.getConnections(t.id).length > 0
        if (live && this.peers.has(id) && !this.missed.has(id)) this.missed.add(id)
        else {
          this.peers.delete(id)
          this.missed.delete(id)
        }
      }
    })
    this.lastRefresh = {
      bootstrapFailed: boot.failed.map((f) => bootstrapDialError(f.addr, f.error)),
      bootstrapAnnouncements,
      dialled,
      otherModel
    }
  }

  /** Blocks of [from, to) served by at least one peer not banned. */
  coveredBlocks(from: number, to: number): number[] {
    const out: number[] = []
    const live = this.list().filter((p) => !this.isBanned(p.peerId))
    for (let b = from; b < to; b++) if (live.some((p) => p.start <= b && b < p.end)) out.push(b)
    return out
  }

  /** Why no route over [from, to) exists, one line per fact (for `--verbose`). */
  explain(from: number, to: number): string[] {
    return explainMissingRoute(this, from, to)
  }

  list(): PeerRecord[] {
    return [...this.peers.values()].sort((a, b) => a.start - b.start || a.end - b.end || a.peerId.localeCompare(b.peerId))
  }

  /** The round trip the last info request to `peerId` took (0 for a peer not known). */
  rttOf(peerId: string): number {
    return this.peers.get(peerId)?.rttMs ?? 0
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
    const candidates = this.list()
      .filter((p) => !this.isBanned(p.peerId))
      .map((p) => ({ ...p, measuredMsPerBlock: this.load.measuredMsPerBlock(p.peerId), jitter: this.load.jitter(p.peerId) }))
    if (!wire) return planRoute(candidates, from, to).map((h) => this.target(h))
    return planWireRoute(candidates, from, to, wire.preference, wire.chained).map((h) => ({
      ...this.target(h),
      wireDtype: h.wireDtype
    }))
  }

  private target(h: RouteHop): HopTarget {
    const p = this.peers.get(h.peerId)!
    return {
      ...h,
      addrs: p.addrs,
      wireDtypes: p.wireDtypes,
      ...(p.kvDtype ? { kvDtype: p.kvDtype } : {}),
      ...(p.backend ? { backend: p.backend } : {})
    }
  }

  /** Refresh until a route exists (announcements take a moment to arrive), or throw NoRouteError. */
  async waitForRoute(
    from: number,
    to: number,
    timeoutMs: number,
    wire?: RouteWire,
    { signal }: AbortOptions = {}
  ): Promise<HopTarget[]> {
    const t0 = Date.now()
    const deadline = t0 + timeoutMs
    for (;;) {
      await this.refresh({ signal })
      try {
        return this.route(from, to, wire)
      } catch (err) {
        if (!(err instanceof NoRouteError)) throw err
        // every bootstrap address failed and nobody else is known: waiting cannot help, and
        // the address is what the user must fix
        const failed = this.lastRefresh.bootstrapFailed
        if (failed.length > 0 && failed.length === this.bootstrap.length && this.peers.size === 0) throw failed[0]
        // the last refresh's facts ride on the error (a test runner prints them): a route that
        // never came under load vs no swarm; the message and class stay what callers match
        if (Date.now() > deadline) throw Object.assign(err, { lastRefresh: this.explain(from, to) })
        this.onWait?.({
          covered: this.coveredBlocks(from, to).length,
          total: to - from,
          peers: this.peers.size,
          elapsedMs: Date.now() - t0
        })
      }
      await new Promise((r) => setTimeout(r, 300))
      signal?.throwIfAborted()
    }
  }
}
