/**
 * The announcements a node holds and hands to peers that ask (announcement-exchange.ts), kept so
 * that an honest, live, reachable node cannot be evicted by unverified newcomers (issue #39,
 * finding 2: 520 fresh keys with 1 h lifetimes pushed every honest entry out, since the entry that
 * expired first went):
 * - a lifetime is counted from the issue time and capped at `maxLifetimeMs`, whatever the signed
 *   expiry says (verifyAnnouncement already refuses longer ones: options.ts);
 * - an entry is *confirmed* once its peer id was seen on a connection (a Noise handshake proves
 *   a live holder of the key) or served a step; a full store evicts unconfirmed entries first,
 *   from the source holding the most, and never evicts a confirmed one for an unconfirmed one;
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

interface Entry {
  a: Announcement
  signed: SignedAnnouncement
  /** The signed expiry, capped at issue time + maxLifetimeMs. */
  expiresAtMs: number
  confirmed: boolean
  source?: AnnouncementSource
}

/** The newest verified announcement of each peer, as received (so its signature still checks). */
export class AnnouncementStore {
  private readonly held = new Map<string, Entry>()
  /** Peers confirmed before their announcement arrived (bounded like the store). */
  private readonly confirmedIds = new Set<string>()
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
    const confirmed = prev?.confirmed === true || this.confirmedIds.has(a.peerId)
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
   * kept over unconfirmed ones.
   */
  confirm(peerId: string): void {
    const e = this.held.get(peerId)
    if (e) e.confirmed = true
    this.confirmedIds.delete(peerId)
    this.confirmedIds.add(peerId)
    if (this.confirmedIds.size > this.max) {
      const oldest = this.confirmedIds.values().next().value
      if (oldest !== undefined) this.confirmedIds.delete(oldest)
    }
  }

  /** Whether `peerId`'s entry is confirmed. */
  isConfirmed(peerId: string): boolean {
    return this.held.get(peerId)?.confirmed === true
  }

  /**
   * Live announcements, for one model or all: unconfirmed first, then confirmed, newest first in
   * each, so a client that keeps the last ones it learned (client/routing/swarm-view.ts) keeps confirmed ones.
   */
  list(modelId?: string, now = Date.now()): SignedAnnouncement[] {
    this.prune(now)
    return [...this.held.values()]
      .filter((e) => modelId === undefined || e.a.modelId === modelId)
      .sort((x, y) => Number(x.confirmed) - Number(y.confirmed) || y.a.issuedAtMs - x.a.issuedAtMs)
      .map((e) => e.signed)
  }

  get size(): number {
    return this.held.size
  }

  /**
   * The entry to evict from a full store: an unconfirmed one of the source holding the most,
   * soonest expiring among those; else, when the newcomer is confirmed, the confirmed one that
   * expires first; else the unconfirmed newcomer itself.
   */
  private victim(newcomer: string, newcomerConfirmed: boolean): string | undefined {
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
    if (!newcomerConfirmed) return newcomer
    let first: string | undefined
    let at = Number.POSITIVE_INFINITY
    for (const [id, e] of this.held) if (e.expiresAtMs < at) [first, at] = [id, e.expiresAtMs]
    return first
  }

  private prune(now: number): void {
    for (const [id, e] of this.held) if (e.expiresAtMs <= now) this.held.delete(id)
  }
}
