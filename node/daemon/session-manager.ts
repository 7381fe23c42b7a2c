import type { PeerSource } from '../../protocol/index.js'
import { BadSpanError, BusyError, type DType, DuplicateSessionError, UnknownSessionError } from '../../protocol/index.js'
import { grownKvCapacity, type ShardLike } from '../../shards/index.js'
import { type NodeSession, releaseSession, sessionKey } from './node-session.js'

export interface SessionManagerInit {
  readonly shard: ShardLike
  /** Sessions held at once; more get BUSY. */
  readonly maxSessions: number
  /** Sessions one peer may hold at once (issue #17: one peer could take every slot). */
  readonly maxSessionsPerOwner?: number
  /**
   * KV positions held over all sessions; an open, or a step that grows a session's KV, that would
   * exceed it gets BUSY. A session holds what its shard holds for it, which grows as it is filled
   * (shards/kv-cache.ts; issue #39), not the maxLength it asked for.
   */
  readonly maxCacheTokens: number
  /** A session with no request for this long is freed. */
  readonly idleTimeoutMs: number
  /**
   * Per-source shares (issue #39: peer ids cost nothing, so two fresh ids took every slot):
   * sessions and KV positions one remote IP, and one subnet, may hold. Loopback is not counted.
   */
  readonly maxSessionsPerIp?: number
  readonly maxSessionsPerSubnet?: number
  readonly maxCacheTokensPerIp?: number
  readonly maxCacheTokensPerSubnet?: number
  /** A session that took no step (nor import) this long after its open is freed (issue #39). */
  readonly firstStepTimeoutMs?: number
  /** A session whose owner has had no connection for this long, and that no request used meanwhile, is freed. */
  readonly orphanTimeoutMs?: number
  readonly now?: () => number
}

export interface OpenRequest {
  readonly sessionId: string
  readonly start: number
  readonly end: number
  readonly maxLength: number
  /** The peer that opened the session (the client). */
  readonly owner: string
  /** In chained mode, the peer whose output this hop takes. */
  readonly upstream?: string
  readonly wireDtype?: DType
  /** Where the open came from (protocol/peer-source.ts); undefined: loopback, not counted per source. */
  readonly source?: PeerSource
}

interface SourceRecord {
  source?: PeerSource
  openedAt: number
  /** A step or an import reached the session: it is in use, not squatted. */
  used: boolean
}

/**
 * The sessions a node serves, one NodeSession record each, keyed by (owner, id): caps,
 * ownership, retries and idle expiry around a Shard. Every failure throws a typed error and
 * leaves every session as it was.
 */
export class SessionManager {
  private readonly sessions = new Map<string, NodeSession>()
  /** Per session key: its source and whether it was used (kept beside the NodeSession records). */
  private readonly records = new Map<string, SourceRecord>()
  /** Owners with no connection left, and since when (ownerGone / ownerBack). */
  private readonly gone = new Map<string, number>()
  private readonly now: () => number
  tokensServed = 0
  /** KV positions held outside sessions (sealed holds, kv-hold.ts): they count against maxCacheTokens too. */
  heldTokens: () => number = () => 0

  constructor(private readonly init: SessionManagerInit) {
    this.now = init.now ?? Date.now
  }

  get active(): number {
    return this.sessions.size
  }

  /** Sessions held at most (the cap the proof of work's difficulty scales with). */
  get capacity(): number {
    return this.init.maxSessions
  }

  get reservedTokens(): number {
    let n = this.heldTokens()
    for (const s of this.sessions.values()) n += this.held(s)
    return n
  }

  /** KV positions the shard holds for `s` now. */
  private held(s: NodeSession): number {
    return this.init.shard.kvPositionsHeld(s.key)
  }

  get freeCacheTokens(): number {
    return Math.max(0, this.init.maxCacheTokens - this.reservedTokens)
  }

  /** Every check of an open, none of which costs more than a map lookup: run before any key agreement. */
  checkOpen(req: OpenRequest): void {
    const { shard } = this.init
    if (this.sessions.has(sessionKey(req.owner, req.sessionId)))
      throw new DuplicateSessionError(`session ${req.sessionId} is already open here`)
    if (req.start < shard.start || req.end > shard.end || req.start >= req.end) {
      throw new BadSpanError(`this node serves blocks [${shard.start}, ${shard.end}), not [${req.start}, ${req.end})`)
    }
    if (!(req.maxLength >= 1 && req.maxLength <= shard.config.seqLen)) {
      throw new BadSpanError(`max length ${req.maxLength} is outside 1..${shard.config.seqLen}`)
    }
    if (this.sessions.size >= this.init.maxSessions) throw new BusyError(`serving ${this.sessions.size} sessions, the cap`)
    const perOwner = this.init.maxSessionsPerOwner ?? this.init.maxSessions
    if (this.ownedBy(req.owner) >= perOwner) throw new BusyError(`this peer holds ${perOwner} sessions here, the per-peer cap`)
    // what the shard holds at open, not maxLength: the rest is checked as it is filled (checkGrowth)
    const atOpen = shard.kvAtOpen(req.maxLength).positions
    if (atOpen > this.freeCacheTokens) {
      throw new BusyError(`${atOpen} KV positions needed to open, ${this.freeCacheTokens} free`)
    }
    if (req.source) this.checkSource(req.source, atOpen, true)
  }

  /**
   * Before `s` is filled up to `positions` (a step, an import): BUSY if the KV its shard would
   * grow to passes what is free, or its source's per-IP or per-subnet share (issue #39).
   */
  checkGrowth(s: NodeSession, positions: number): void {
    if (!this.init.shard.kvAtOpen(s.maxLength).grows) return
    const held = this.held(s)
    const more = grownKvCapacity(held, Math.min(positions, s.maxLength), s.maxLength) - held
    if (more <= 0) return
    if (more > this.freeCacheTokens)
      throw new BusyError(`this node's KV is full: ${more} more positions needed, ${this.freeCacheTokens} free`)
    const source = this.records.get(s.key)?.source
    if (source) this.checkSource(source, more, false)
  }

  /** The per-IP and per-subnet shares (issue #39), one pass over the sessions; `opening` counts a new session. */
  private checkSource(source: PeerSource, positions: number, opening: boolean): void {
    const { init } = this
    let ipSessions = 0
    let ipTokens = 0
    let netSessions = 0
    let netTokens = 0
    for (const [key, r] of this.records) {
      const s = this.sessions.get(key)
      if (!s || !r.source) continue
      if (r.source.ip === source.ip) {
        ipSessions++
        ipTokens += this.held(s)
      }
      if (r.source.subnet === source.subnet) {
        netSessions++
        netTokens += this.held(s)
      }
    }
    const cap = (n: number | undefined) => n ?? Number.POSITIVE_INFINITY
    if (opening && ipSessions >= cap(init.maxSessionsPerIp))
      throw new BusyError(`your address holds ${ipSessions} sessions here, the per-IP share`)
    if (opening && netSessions >= cap(init.maxSessionsPerSubnet))
      throw new BusyError(`your subnet holds ${netSessions} sessions here, the per-subnet share`)
    if (ipTokens + positions > cap(init.maxCacheTokensPerIp))
      throw new BusyError(`your address holds ${ipTokens} KV positions here; ${positions} more pass the per-IP share`)
    if (netTokens + positions > cap(init.maxCacheTokensPerSubnet))
      throw new BusyError(`your subnet holds ${netTokens} KV positions here; ${positions} more pass the per-subnet share`)
  }

  open(req: OpenRequest, extra: Pick<NodeSession, 'chain' | 'keys' | 'upstreamSessionId'> = {}): NodeSession {
    this.checkOpen(req)
    const key = sessionKey(req.owner, req.sessionId)
    this.init.shard.openSession(key, { maxLength: req.maxLength, start: req.start, end: req.end })
    const s: NodeSession = {
      id: req.sessionId,
      key,
      owner: req.owner,
      upstream: req.upstream,
      start: req.start,
      end: req.end,
      maxLength: req.maxLength,
      wireDtype: req.wireDtype ?? 'f32',
      lastUsed: this.now(),
      upstreamStepId: 0,
      ...extra
    }
    this.sessions.set(key, s)
    this.records.set(key, { source: req.source, openedAt: s.lastUsed, used: false })
    return s
  }

  /** A step or a KV import reached `s`: it counts as used (no first-step reclaim). */
  used(s: NodeSession): void {
    const r = this.records.get(s.key)
    if (r) r.used = true
    s.lastUsed = this.now()
  }

  /** `owner`'s last connection closed: its sessions go after orphanTimeoutMs unless used or it returns. */
  ownerGone(owner: string): void {
    if (this.holdsAny(owner)) this.gone.set(owner, this.now())
  }

  /** `owner` connected again. */
  ownerBack(owner: string): void {
    this.gone.delete(owner)
  }

  /** `from`'s own session `id` (steps, rewinds, closes, exports, imports, awaits). */
  owned(id: string, from: string): NodeSession {
    const s = this.sessions.get(sessionKey(from, id))
    // Someone else's session of that id is as unknown as no session: existence is not revealed.
    if (!s) throw new UnknownSessionError(`no session ${id} of yours here`)
    s.lastUsed = this.now()
    return s
  }

  /** Sessions `id` whose chained upstream is `from` (one per owner that routed through it). */
  fedBy(id: string, from: string): NodeSession[] {
    const out: NodeSession[] = []
    for (const s of this.sessions.values()) if (s.id === id && s.upstream === from) out.push(s)
    return out
  }

  /** The session a request from `from` names, owned or fed by it; undefined if none (no side effects). */
  find(id: string, from: string): NodeSession | undefined {
    return this.sessions.get(sessionKey(from, id)) ?? this.fedBy(id, from)[0]
  }

  /** A request or a step used the session now: it is not idle. */
  touch(s: NodeSession): void {
    s.lastUsed = this.now()
  }

  rewind(s: NodeSession, length: number): void {
    this.init.shard.rewind(s.key, length)
    s.last = undefined
  }

  close(s: NodeSession): void {
    if (this.sessions.get(s.key) !== s) return
    this.sessions.delete(s.key)
    this.records.delete(s.key)
    this.init.shard.closeSession(s.key)
    releaseSession(s)
  }

  /**
   * Free sessions idle past the timeout, opened but never used past firstStepTimeoutMs, or whose
   * owner left orphanTimeoutMs ago and no request used since (issue #39); returns how many.
   */
  sweep(): number {
    const now = this.now()
    const cutoff = now - this.init.idleTimeoutMs
    const firstStep = this.init.firstStepTimeoutMs ?? Number.POSITIVE_INFINITY
    const orphan = this.init.orphanTimeoutMs ?? Number.POSITIVE_INFINITY
    let n = 0
    for (const s of [...this.sessions.values()]) {
      const r = this.records.get(s.key)
      const goneAt = this.gone.get(s.owner)
      const unused = r !== undefined && !r.used && now - r.openedAt >= firstStep
      const orphaned = goneAt !== undefined && now - Math.max(goneAt, s.lastUsed) >= orphan
      if (s.lastUsed < cutoff || unused || orphaned) {
        this.close(s)
        n++
      }
    }
    for (const owner of this.gone.keys()) if (!this.holdsAny(owner)) this.gone.delete(owner)
    return n
  }

  /** The session's KV was replaced (an import): forget the cached last step. */
  reset(s: NodeSession): void {
    s.last = undefined
  }

  /** Whether the record is still served (not closed, expired or refused meanwhile). */
  isOpen(s: NodeSession): boolean {
    return this.sessions.get(s.key) === s
  }

  /** True when `from` owns or feeds (chained upstream) at least one session here. */
  holdsAny(from: string): boolean {
    for (const s of this.sessions.values()) if (s.owner === from || s.upstream === from) return true
    return false
  }

  ownedBy(owner: string): number {
    let n = 0
    for (const s of this.sessions.values()) if (s.owner === owner) n++
    return n
  }

  closeAll(): void {
    for (const s of [...this.sessions.values()]) this.close(s)
    this.gone.clear()
  }
}
