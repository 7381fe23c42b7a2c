import type { AbortOptions } from '@libp2p/interface'
import type { Host } from '../../protocol/index.js'
import { errorCode } from '../../shards/index.js'
import { KvRestoreMismatchError, NoPerHopIdsError } from '../errors.js'
import type { SwarmView } from '../routing/swarm-view.js'
import { chainIdsAt, routeSessionIds } from '../session/chain-ids.js'
import { HopSession, type HopTarget } from '../session/hop.js'
import type { WireLedger } from '../session/wire-ledger.js'
import type { WirePreference } from '../session/wire-negotiation.js'
import { betweenHops, type KvMoveInit, moveKv } from './kv-grants.js'
import { type SnapshotKeeper, spanKey, wrapFor } from './snapshots.js'
import { freshSubRoutes, standbyCandidate } from './standby-peers.js'

export interface StandbyKeeperInit {
  readonly host: Host
  readonly view: SwarmView
  readonly snapshots: SnapshotKeeper
  readonly modelId: string
  readonly dim: number
  readonly maxLength: number
  readonly chained: boolean
  /** What the client asked for: the dtype of a fresh hop a relayed mixed takeover opens. */
  readonly wirePreference: WirePreference
  readonly wireLedger?: WireLedger
  readonly log?: (e: Record<string, unknown>) => void
}

/** Node-to-node feeds of a fresh standby that may fail (its source cannot reach it yet) before it is dropped. */
const MAX_FEED_FAILURES = 3

/** How long a peer that failed to open a standby session is not asked again. */
const STANDBY_REFUSED_MS = 60_000

/** A peer holding a session that tracks one span of the live route through sealed deltas. */
interface Standby {
  /** The standby's session (opened under the id the next route will use). */
  readonly hop: HopSession
  /** The live hop whose snapshots it imports, and that hop's session. */
  readonly livePeerId: string
  readonly liveSessionId: string
  /** How many of the live hop's sealed snapshots it imported, up to which position. */
  fed: number
  end: number
  /** The last sealed sequence it imported (node-to-node moves continue from it, kv-grants.ts). */
  sequence: number
  /** Node-to-node feeds that failed in a row (a source that does not know the standby's address yet). */
  failures?: number
  /** The live snapshot key wrapped to the standby (made once per standby). */
  wrappedKey?: Uint8Array
}

/**
 * What a failover takes over from the standbys: the new route, per hop the standby session that takes it over
 * (undefined: a fresh peer the caller opens and restores from the client-kept snapshots), and the positions each holds.
 */
export interface StandbyRoute {
  readonly route: HopTarget[]
  readonly hops: Array<HopSession | undefined>
  readonly kept: ReadonlyMap<HopSession, number>
}

/**
 * Standby peers fed with sealed deltas (issue 6 part 4b): for each span of the live route, a
 * peer serving it that is not on the route holds a session (opened under the id the next route
 * will use) into which the client imports every sealed delta the live hop exports, the snapshot
 * key wrapped to the standby's X25519 key. The standby checks every import as any import (tag,
 * binding, sequence, order). When a hop dies, the standbys become the route: their KV is already
 * there up to the last delta, so only the positions after it are replayed and no snapshot moves
 * at failure time. A standby runs the wire dtype its live hop negotiated (a chain: the chain's),
 * so only peers that accept it are picked.
 *
 * Relayed, the takeover is per span: a fed standby where there is one, elsewhere a fresh peer
 * that imports the client-kept snapshots (or, without any, replays). Chained, it is all spans or
 * none: each standby was opened with its downstream standby as next hop and its upstream standby
 * as the only peer allowed to forward steps to it, so a fresh hop cannot be spliced in; without
 * a complete set the failover falls back to the client-kept snapshots or a replay.
 */
export class StandbyKeeper {
  private standbys = new Map<string, Standby>()
  /** Spans already reported without a standby (logged once). */
  private readonly unavailable = new Set<string>()
  /**
   * Peers whose standby session could not be opened, until when they are not asked again (every
   * capture would otherwise retry the same refusal, e.g. on a stale view of the dtypes it accepts).
   */
  private readonly refusedUntilMs = new Map<string, number>()

  constructor(private readonly init: StandbyKeeperInit) {}

  /**
   * After a capture: open standbys where missing (session `nextSessionId`), then import into each
   * the snapshots its live hop sealed since the last feed.
   */
  async feed(
    hops: readonly HopSession[],
    nextSessionId: string,
    history: Float32Array,
    options: AbortOptions = {}
  ): Promise<void> {
    await this.ensure(hops, nextSessionId, options)
    await Promise.all(
      hops.map(async (live) => {
        const st = this.standbys.get(spanKey(live))
        const held = this.init.snapshots.held(live)
        if (!st || !held || held.sealed.length <= st.fed) return
        const t0 = performance.now()
        const first = st.fed
        try {
          st.wrappedKey ??= wrapFor(st.hop, held.snapshotKey)
          const length = await this.init.snapshots.importInto(st.hop, held, first, history, st.wrappedKey, options)
          if (length !== held.end)
            throw new KvRestoreMismatchError(`standby ${st.hop.target.peerId} holds ${length} positions, not ${held.end}`)
          st.fed = held.sealed.length
          st.end = held.end
          let bytes = 0
          for (let i = first; i < st.fed; i++) bytes += held.sealed[i].length
          this.init.log?.({
            event: 'standby-fed',
            peerId: st.hop.target.peerId,
            span: [live.target.start, live.target.end],
            positions: st.end,
            snapshots: st.fed - first,
            bytes,
            ms: Math.round((performance.now() - t0) * 10) / 10
          })
        } catch (err) {
          this.drop(spanKey(live), err)
        }
      })
    )
  }

  /**
   * Issue #41: feed the standbys node to node. Each live hop seals the positions its standby lacks
   * and sends them straight to it under a fresh grant (kv-grants.ts); the client checks the
   * standby's signed receipt. Returns the hops with no standby (the caller keeps their snapshots).
   */
  async feedDirect(
    hops: readonly HopSession[],
    nextSessionId: string,
    history: Float32Array,
    length: number,
    mover: KvMoveInit,
    options: AbortOptions = {}
  ): Promise<HopSession[]> {
    await this.ensure(hops, nextSessionId, options)
    await Promise.all(
      hops.map(async (live) => {
        const st = this.standbys.get(spanKey(live))
        if (!st || st.end >= length) return
        const t0 = performance.now()
        try {
          st.wrappedKey ??= wrapFor(st.hop, live.snapshotKey)
          const move = { ...betweenHops(live, st.hop), from: st.end, to: length, firstSequence: st.sequence + 1 }
          const receipt = await moveKv(mover, { ...move, wrappedKey: st.wrappedKey }, history, options)
          st.fed++
          st.end = receipt.length
          st.sequence = receipt.sequence
          st.failures = 0
          this.init.log?.({
            event: 'standby-fed',
            path: 'node',
            peerId: st.hop.target.peerId,
            span: [live.target.start, live.target.end],
            positions: st.end,
            bytes: receipt.bytes,
            ms: Math.round((performance.now() - t0) * 10) / 10
          })
        } catch (err) {
          // a fresh standby's announcement may not have reached the source yet: retry at the next feed
          st.failures = (st.failures ?? 0) + 1
          if (st.failures < MAX_FEED_FAILURES && st.fed === 0 && errorCode(err) === 'NEXT_HOP_FAILED')
            this.init.log?.({ event: 'standby-feed-retry', peerId: st.hop.target.peerId, message: (err as Error).message })
          else this.drop(spanKey(live), err)
        }
      })
    )
    return hops.filter((h) => !this.standbys.has(spanKey(h)))
  }

  /** Give every span of the route a standby (a chain: all of them, wired, or none). */
  private async ensure(hops: readonly HopSession[], nextSessionId: string, options: AbortOptions): Promise<void> {
    for (const [key, st] of this.standbys) {
      const live = hops.find((h) => spanKey(h) === key)
      if (!live || live.target.peerId !== st.livePeerId || st.liveSessionId !== live.sessionId) this.drop(key)
    }
    if (hops.every((h) => this.standbys.has(spanKey(h)))) return
    if (this.init.chained) for (const key of [...this.standbys.keys()]) this.drop(key)
    const refused = [...this.refusedUntilMs].filter(([, until]) => until > Date.now()).map(([id]) => id)
    const used = new Set([
      ...refused,
      ...hops.map((h) => h.target.peerId),
      ...[...this.standbys.values()].map((s) => s.hop.target.peerId)
    ])
    const targets: Array<HopTarget | undefined> = hops.map((h) => {
      if (this.standbys.has(spanKey(h))) return undefined
      const t = standbyCandidate(this.init.view, h, used)
      if (!t) {
        if (!this.unavailable.has(spanKey(h)))
          this.init.log?.({ event: 'standby-unavailable', span: [h.target.start, h.target.end] })
        this.unavailable.add(spanKey(h))
      }
      return t
    })
    if (this.init.chained && targets.some((t) => !t)) return
    // Open from the last hop back, so in a chain each standby's downstream already knows the session.
    // Each standby an id of its own, as each live hop has, relayed and chained (chain-ids.ts, issue #39)
    const ids = routeSessionIds(hops.length, nextSessionId)
    for (let i = hops.length - 1; i >= 0; i--) {
      const t = targets[i]
      if (!t) continue
      try {
        const { chained, modelId, maxLength } = this.init
        const hop = await HopSession.open(
          this.init.host,
          t,
          this.init.dim,
          {
            ...(chained ? chainIdsAt(ids, i) : { sessionId: ids[i] }),
            ...{ modelId, maxLength, wireDtype: hops[i].wireDtype, ledger: this.init.wireLedger },
            next: chained ? targets[i + 1] : undefined,
            upstream: chained && i > 0 ? targets[i - 1]!.peerId : undefined
          },
          options
        )
        // an older hop would forward under its own id: no standby chain then (a failover replays)
        if (chained && hops.length > 1 && !hop.chainedSessionIds) {
          await hop.close()
          throw new NoPerHopIdsError('the standby does not acknowledge per-hop session ids')
        }
        const st = { hop, livePeerId: hops[i].target.peerId, liveSessionId: hops[i].sessionId }
        this.standbys.set(spanKey(hops[i]), { ...st, fed: 0, end: 0, sequence: 0 })
        this.unavailable.delete(spanKey(hops[i]))
        this.init.log?.({
          event: 'standby',
          peerId: t.peerId,
          span: [t.start, t.end],
          sessionId: hop.sessionId,
          livePeerId: hops[i].target.peerId,
          wire: hops[i].wireDtype
        })
      } catch (err) {
        this.init.log?.({ event: 'standby-failed', peerId: t.peerId, span: [t.start, t.end], message: (err as Error).message })
        this.refusedUntilMs.set(t.peerId, Date.now() + STANDBY_REFUSED_MS)
        if (this.init.chained) {
          for (const key of [...this.standbys.keys()]) this.drop(key)
          return
        }
      }
    }
  }

  /**
   * On failover from `route`: the spans with a fed standby that is not banned take it over (its
   * session already uses the next route's id). Chained, that must be every span. Relayed, every
   * other span gets a fresh peer (not banned, no standby, accepting the wire preference) that the
   * caller opens; restore() then fills it from the client-kept snapshots. Undefined, with every
   * standby closed (their session ids would collide with the new route's), when no standby
   * serves or a span finds no fresh peer: the caller plans a whole new route.
   */
  async take(route: readonly HopTarget[], { signal }: AbortOptions = {}): Promise<StandbyRoute | undefined> {
    signal?.throwIfAborted()
    const sts = route.map((h) => {
      const s = this.standbys.get(`${h.start}:${h.end}`)
      return s && s.fed > 0 && !this.init.view.isBanned(s.hop.target.peerId) ? s : undefined
    })
    const taken = sts.filter((s): s is Standby => s !== undefined)
    const why =
      taken.length === 0
        ? 'no span of the route has a fed standby'
        : this.init.chained && taken.length < route.length
          ? 'chained: not every span of the route has a fed standby'
          : undefined
    const fresh =
      why === undefined
        ? freshSubRoutes(this.init.view, route, sts.map(Boolean), this.peers, this.init.wirePreference)
        : undefined
    if (!fresh) {
      if (this.standbys.size > 0)
        this.init.log?.({ event: 'standby-skipped', why: why ?? 'no fresh peer for a span without a standby' })
      await this.closeAll()
      return undefined
    }
    for (const [key, st] of this.standbys) if (!taken.includes(st)) this.drop(key)
    this.standbys = new Map()
    const out: StandbyRoute = { route: [], hops: [], kept: new Map(taken.map((s) => [s.hop, s.end])) }
    route.forEach((_, i) => {
      const st = sts[i]
      const add = st ? [st.hop.target] : fresh[i]!
      for (const t of add) {
        out.route.push(t)
        out.hops.push(st?.hop)
      }
    })
    return out
  }

  get peers(): string[] {
    return [...this.standbys.values()].map((s) => s.hop.target.peerId)
  }

  async closeAll(): Promise<void> {
    const all = [...this.standbys.values()]
    this.standbys = new Map()
    await Promise.all(all.map((s) => s.hop.close()))
  }

  private drop(key: string, err?: unknown): void {
    const st = this.standbys.get(key)
    if (!st) return
    this.standbys.delete(key)
    if (err === undefined) {
      st.hop.close().catch(() => {}) // no longer needed: free its KV
      return
    }
    this.init.log?.({ event: 'standby-failed', peerId: st.hop.target.peerId, span: key, message: (err as Error).message })
    st.hop.abort()
  }
}
