import { BadSpanError, BusyError, type DType, DuplicateSessionError, UnknownSessionError } from '../protocol/index.js'
import type { Shard } from '../shards/index.js'
import { type NodeSession, releaseSession, sessionKey } from './node-session.js'

export interface SessionManagerInit {
  readonly shard: Shard
  /** Sessions held at once; more get BUSY. */
  readonly maxSessions: number
  /** Sessions one peer may hold at once (issue #17: one peer could take every slot). */
  readonly maxSessionsPerOwner?: number
  /** KV positions reserved over all sessions; an open that would exceed it gets BUSY. */
  readonly maxCacheTokens: number
  /** A session with no request for this long is freed. */
  readonly idleTimeoutMs: number
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
}

/**
 * The sessions a node serves, one NodeSession record each, keyed by (owner, id): caps,
 * ownership, retries and idle expiry around a Shard. Every failure throws a typed error and
 * leaves every session as it was.
 */
export class SessionManager {
  private readonly sessions = new Map<string, NodeSession>()
  private readonly now: () => number
  tokensServed = 0

  constructor(private readonly init: SessionManagerInit) {
    this.now = init.now ?? Date.now
  }

  get active(): number {
    return this.sessions.size
  }

  get reservedTokens(): number {
    let n = 0
    for (const s of this.sessions.values()) n += s.maxLength
    return n
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
    if (req.maxLength > this.freeCacheTokens) {
      throw new BusyError(`${req.maxLength} KV positions asked, ${this.freeCacheTokens} free`)
    }
  }

  open(req: OpenRequest, extra: Pick<NodeSession, 'chain' | 'keys'> = {}): NodeSession {
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
    return s
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
    this.init.shard.closeSession(s.key)
    releaseSession(s)
  }

  /** Free sessions idle past the timeout; returns how many. */
  sweep(): number {
    const cutoff = this.now() - this.init.idleTimeoutMs
    let n = 0
    for (const s of [...this.sessions.values()]) {
      if (s.lastUsed < cutoff) {
        this.close(s)
        n++
      }
    }
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
  }
}
