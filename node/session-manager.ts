import type { Shard } from '../shards/index.js'
import {
  BadShapeError,
  BadSpanError,
  BusyError,
  DuplicateSessionError,
  UnauthorizedError,
  UnknownSessionError
} from './errors.js'

export interface SessionManagerInit {
  readonly shard: Shard
  /** Sessions held at once; more get BUSY. */
  readonly maxSessions: number
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
}

interface SessionState {
  readonly owner: string
  readonly upstream?: string
  readonly maxLength: number
  lastUsed: number
  /** The last step, kept so a retried step (same id and position) is answered without recomputing. */
  last?: { stepId: number; startPosition: number; rows: number; output: Float32Array }
}

export interface StepOutcome {
  readonly output: Float32Array
  readonly computeMs: number
  readonly duplicate: boolean
}

/**
 * The sessions a node serves: caps, ownership, retries and idle expiry around a Shard.
 * Every failure throws a typed error and leaves every session as it was.
 */
export class SessionManager {
  private readonly sessions = new Map<string, SessionState>()
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

  open(req: OpenRequest): void {
    const { shard } = this.init
    if (this.sessions.has(req.sessionId)) throw new DuplicateSessionError(`session ${req.sessionId} is already open here`)
    if (req.start < shard.start || req.end > shard.end || req.start >= req.end) {
      throw new BadSpanError(`this node serves blocks [${shard.start}, ${shard.end}), not [${req.start}, ${req.end})`)
    }
    if (!(req.maxLength >= 1 && req.maxLength <= shard.config.seqLen)) {
      throw new BadSpanError(`max length ${req.maxLength} is outside 1..${shard.config.seqLen}`)
    }
    if (this.sessions.size >= this.init.maxSessions) throw new BusyError(`serving ${this.sessions.size} sessions, the cap`)
    if (req.maxLength > this.freeCacheTokens) {
      throw new BusyError(`${req.maxLength} KV positions asked, ${this.freeCacheTokens} free`)
    }
    shard.openSession(req.sessionId, { maxLength: req.maxLength, start: req.start, end: req.end })
    this.sessions.set(req.sessionId, { owner: req.owner, upstream: req.upstream, maxLength: req.maxLength, lastUsed: this.now() })
  }

  /** Run a step for `from` (owner or upstream). Retries of the last step return its output again. */
  step(sessionId: string, from: string, stepId: number, startPosition: number, hidden: Float32Array): StepOutcome {
    const s = this.authorize(sessionId, from, true)
    const dim = this.init.shard.config.dim
    if (hidden.length === 0 || hidden.length % dim !== 0) {
      throw new BadShapeError(`hidden states of ${hidden.length} values are not rows of ${dim}`)
    }
    const rows = hidden.length / dim
    const last = s.last
    if (last && last.stepId === stepId && last.startPosition === startPosition && last.rows === rows) {
      return { output: last.output, computeMs: 0, duplicate: true }
    }
    const t0 = performance.now()
    const output = this.init.shard.forward(sessionId, hidden, startPosition)
    const computeMs = performance.now() - t0
    // the next step is a network hop away: free the cores for the peers and the client
    this.init.shard.rest()
    s.last = { stepId, startPosition, rows, output }
    this.tokensServed += rows
    return { output, computeMs, duplicate: false }
  }

  rewind(sessionId: string, from: string, length: number): void {
    const s = this.authorize(sessionId, from, false)
    this.init.shard.rewind(sessionId, length)
    s.last = undefined
  }

  close(sessionId: string, from: string): void {
    this.authorize(sessionId, from, false)
    this.sessions.delete(sessionId)
    this.init.shard.closeSession(sessionId)
  }

  /** Free sessions idle past the timeout; returns how many. */
  sweep(): number {
    const cutoff = this.now() - this.init.idleTimeoutMs
    let n = 0
    for (const [id, s] of this.sessions) {
      if (s.lastUsed < cutoff) {
        this.sessions.delete(id)
        this.init.shard.closeSession(id)
        n++
      }
    }
    return n
  }

  /** Throws unless the session exists and `from` opened it (results go to the owner only). */
  checkOwner(sessionId: string, from: string): void {
    this.authorize(sessionId, from, false)
  }

  /** True when the session exists and `from` opened it (its steps need no step tag). */
  isOwner(sessionId: string, from: string): boolean {
    return this.sessions.get(sessionId)?.owner === from
  }

  /** The session's KV was replaced (an import): forget the cached last step. */
  reset(sessionId: string): void {
    const s = this.sessions.get(sessionId)
    if (s) s.last = undefined
  }

  /** A session's owner, upstream and max length, or undefined (read before a request is decoded). */
  describe(sessionId: string): { owner: string; upstream?: string; maxLength: number } | undefined {
    return this.sessions.get(sessionId)
  }

  /** True when `from` owns or feeds (chained upstream) at least one session here. */
  holdsAny(from: string): boolean {
    for (const s of this.sessions.values()) if (s.owner === from || s.upstream === from) return true
    return false
  }

  has(sessionId: string): boolean {
    return this.sessions.has(sessionId)
  }

  closeAll(): void {
    for (const id of this.sessions.keys()) this.init.shard.closeSession(id)
    this.sessions.clear()
  }

  private authorize(sessionId: string, from: string, allowUpstream: boolean): SessionState {
    const s = this.sessions.get(sessionId)
    if (!s) throw new UnknownSessionError(`no session ${sessionId} here`)
    if (from !== s.owner && !(allowUpstream && s.upstream !== undefined && from === s.upstream)) {
      throw new UnauthorizedError(`peer ${from} does not own session ${sessionId}`)
    }
    s.lastUsed = this.now()
    return s
  }
}
