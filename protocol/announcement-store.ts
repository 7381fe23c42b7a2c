/**
 * The announcements a node holds and hands to peers that ask (announcement-exchange.ts), kept so
 * that an honest, live, reachable node cannot be evicted by unverified newcomers (issue #39,
 * finding 2: 520 fresh keys with 1 h lifetimes pushed every honest entry out, since the entry that
 * expired first went):
 * - a lifetime is counted from the issue time and capped at `maxLifetimeMs`, whatever the signed
 *   expiry says (verifyAnnouncement already refuses longer ones: options.ts);
 * - an entry is *confirmed* once its peer id was seen on a connection (a Noise handshake proves
 *   a live holder of the key), and confirmed more strongly once it served a step (a chained hop
 *   passed this node its output with its receipt, or answered a step this node sent on: a fresh
 *   key and a TCP connection do not fake that); a full store evicts unconfirmed entries first,
 *   from the source holding the most, then entries confirmed by a connection only, and never
 *   evicts an entry for a newcomer confirmed less strongly;
 * - each source (the peer that relayed or handed over the entry, and its IP) may hold at most
 *   `maxPerSource` / `maxPerIp` unconfirmed entries: more from it are refused (not relayed on).
 */
import { MAX_HELD_ANNOUNCEMENTS } from './limits.js'
import { DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS } from './options.js'
import type { Announcement, SignedAnnouncement } from './types.js'

/** Who handed an announcement over: the gossip propagation source or the peer pulled from. */
export interface AnnouncementSource {
  readonly peer?: string
  /** Its IP key (peer-source.ts); undefined for loopback, not counted per IP. */
  readonly ip?: string
}

export interface AnnouncementStoreOptions {
  /** Longest lifetime an entry keeps from its issue time (default DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS, what verifiers accept). */
  readonly maxLifetimeMs?: number
  /** Unconfirmed entries one source peer may hold (default a quarter of the store). */
  readonly maxPerSource?: number
  /** Unconfirmed entries the sources at one IP may hold (default half the store). */
  readonly maxPerIp?: number
}

/** How an entry was confirmed: not at all, by a connection, by a served step (eviction order). */
export type Confirmation = 'connection' | 'step'
const RANK = { none: 0, connection: 1, step: 2 } as const

interface Entry {
  a: Announcement
  signed: SignedAnnouncement
  /** The signed expiry, capped at issue time + maxLifetimeMs. */
  expiresAtMs: number
  /** RANK of its confirmation. */
  confirmed: number
  source?: AnnouncementSource
}

/** The newest verified announcement of each peer, as received (so its signature still checks). */
export class AnnouncementStore {
  private readonly held = new Map<string, Entry>()
  /** Peers confirmed before their announcement arrived, with their RANK (bounded like the store). */
  private readonly confirmedIds = new Map<string, number>()
  private readonly o: Required<AnnouncementStoreOptions>

  constructor(
    private readonly max = MAX_HELD_ANNOUNCEMENTS,
    options: AnnouncementStoreOptions = {}
  ) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError('AnnouncementStore: max must be an integer ≥ 1')
    this.o = {
      maxLifetimeMs: options.maxLifetimeMs ?? DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS,
      maxPerSource: options.maxPerSource ?? Math.max(1, Math.floor(max / 4)),
      maxPerIp: options.maxPerIp ?? Math.max(1, Math.floor(max / 2))
    }
  }

  /** Whether `put` would keep `a` from `source` (gossip relays only what it admits). */
  admits(a: Announcement, source?: AnnouncementSource, now = Date.now()): boolean {
    const prev = this.held.get(a.peerId)
    // only a newer one replaces it: the same one again is not news (and is not relayed on)
    if (prev) return prev.a.issuedAtMs < a.issuedAtMs
    if (this.confirmedIds.has(a.peerId) || source === undefined) return true
    this.prune(now)
    let bySource = 0
    let byIp = 0
    for (const e of this.held.values()) {
      if (e.confirmed || !e.source) continue
      if (source.peer !== undefined && e.source.peer === source.peer) bySource++
      if (source.ip !== undefined && e.source.ip === source.ip) byIp++
    }
    return bySource < this.o.maxPerSource && byIp < this.o.maxPerIp
  }

  /** Keep `signed` (already verified as `a`) unless a newer one of the same peer is held or its source is at its share. */
  put(a: Announcement, signed: SignedAnnouncement, now = Date.now(), source?: AnnouncementSource): void {
    if (!this.admits(a, source, now)) return
    const prev = this.held.get(a.peerId)
    const expiresAtMs = Math.min(a.expiresAtMs, a.issuedAtMs + this.o.maxLifetimeMs)
    if (expiresAtMs <= now) return
    const confirmed = Math.max(prev?.confirmed ?? 0, this.confirmedIds.get(a.peerId) ?? 0)
    this.held.set(a.peerId, { a, signed, expiresAtMs, confirmed, source: prev?.source ?? source })
    if (this.held.size > this.max) this.prune(now)
    while (this.held.size > this.max) {
      const victim = this.victim(a.peerId, confirmed)
      if (victim === undefined) break
      this.held.delete(victim)
    }
  }

  /**
   * `peerId` was seen on a connection or served a step: its entry (now or when it comes) is
   * kept over unconfirmed ones, and one that served a step over those a connection confirmed.
   */
  confirm(peerId: string, by: Confirmation = 'connection'): void {
    const rank = Math.max(RANK[by], this.confirmedIds.get(peerId) ?? 0)
    const e = this.held.get(peerId)
    if (e) e.confirmed = Math.max(e.confirmed, rank)
    this.confirmedIds.delete(peerId)
    this.confirmedIds.set(peerId, rank)
    if (this.confirmedIds.size > this.max) {
      const oldest = this.confirmedIds.keys().next().value
      if (oldest !== undefined) this.confirmedIds.delete(oldest)
    }
  }

  /** Whether `peerId`'s entry is confirmed (`by` a served step: only so). */
  isConfirmed(peerId: string, by: Confirmation = 'connection'): boolean {
    return (this.held.get(peerId)?.confirmed ?? 0) >= RANK[by]
  }

  /**
   * Live announcements, for one model or all: unconfirmed first, then confirmed, newest first in
   * each, so a client that keeps the last ones it learned (client/routing/swarm-view.ts) keeps confirmed ones.
   */
  list(modelId?: string, now = Date.now()): SignedAnnouncement[] {
    this.prune(now)
    return [...this.held.values()]
      .filter((e) => modelId === undefined || e.a.modelId === modelId)
      .sort((x, y) => x.confirmed - y.confirmed || y.a.issuedAtMs - x.a.issuedAtMs)
      .map((e) => e.signed)
  }

  get size(): number {
    return this.held.size
  }

  /**
   * The entry to evict from a full store: an unconfirmed one of the source holding the most,
   * soonest expiring among those; else the soonest expiring of the least confirmed entries, if
   * the newcomer is confirmed at least as strongly as they are; else the newcomer itself.
   */
  private victim(newcomer: string, newcomerRank: number): string | undefined {
    const perSource = new Map<string, number>()
    const sourceKey = (e: Entry) => e.source?.peer ?? e.source?.ip ?? ''
    for (const e of this.held.values()) if (!e.confirmed) perSource.set(sourceKey(e), (perSource.get(sourceKey(e)) ?? 0) + 1)
    let best: string | undefined
    let bestRank: [number, number] = [-1, 0]
    for (const [id, e] of this.held) {
      if (e.confirmed) continue
      const rank: [number, number] = [perSource.get(sourceKey(e)) ?? 0, -e.expiresAtMs]
      if (rank[0] > bestRank[0] || (rank[0] === bestRank[0] && rank[1] > bestRank[1])) [best, bestRank] = [id, rank]
    }
    if (best !== undefined) return best
    let first: string | undefined
    let at: [number, number] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY]
    for (const [id, e] of this.held)
      if (id !== newcomer && (e.confirmed < at[0] || (e.confirmed === at[0] && e.expiresAtMs < at[1])))
        [first, at] = [id, [e.confirmed, e.expiresAtMs]]
    return first !== undefined && newcomerRank > 0 && at[0] <= newcomerRank ? first : newcomer
  }

  private prune(now: number): void {
    for (const [id, e] of this.held) if (e.expiresAtMs <= now) this.held.delete(id)
  }
}
