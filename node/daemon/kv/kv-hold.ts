/**
 * Sealed KV held for a client (issue #41 item 3: "the replacement imports from the standby or
 * from a peer holding sealed snapshots, under a fresh grant"). A holder is any peer of the swarm;
 * it keeps a live hop's sealed deltas as the live hop sent them under the client's grants
 * (destination session `KV_HOLD_SESSION_ID`), opaque: it has no key (the client wraps none for
 * it), so it can neither open nor check them. When the hop dies, the client grants the holder a
 * move to a fresh peer for the span, and the holder forwards the frames as they are; the fresh
 * peer opens them under the key the client wrapped for it and checks every seal (tag, bound
 * session, span, prefix, sequence) as any import.
 *
 * Held bytes count against this node's KV caps (issue #41 item 4): every held byte is converted
 * to KV positions of this node's own span (f32 keys and values, the upper bound) and added to the
 * positions its sessions reserve, so a hold and a session compete for one budget. A hold nobody
 * added to or forwarded for HOLD_IDLE_MS is dropped.
 */
import { BusyError, type KvGrant, KvGrantWrongSpanError, MalformedMessageError } from '../../../protocol/index.js'

/** A hold not used (appended to or forwarded) for this long is dropped. */
export const HOLD_IDLE_MS = 10 * 60_000
/** Holds one client may keep here at once. */
export const MAX_HOLDS_PER_CLIENT = 64

export interface HeldFrame {
  readonly snapshots: readonly Uint8Array[]
  readonly prefixHash: Uint8Array
}

export interface Hold {
  readonly client: string
  readonly source: string
  readonly sourceSessionId: string
  readonly start: number
  readonly end: number
  readonly frames: HeldFrame[]
  /** Positions the frames cover, from 0 (the client's grants say so; the holder cannot check it). */
  length: number
  bytes: number
  usedAtMs: number
}

export interface KvHoldInit {
  /** KV positions this node may still reserve (sessions' caps, without the holds). */
  readonly freeTokens: () => number
  /** Bytes one KV position of this node's span takes (f32 keys and values of every block). */
  readonly bytesPerToken: number
  readonly now?: () => number
}

export class KvHoldStore {
  private readonly holds = new Map<string, Hold>()
  private readonly now: () => number

  constructor(private readonly init: KvHoldInit) {
    this.now = init.now ?? Date.now
  }

  /** KV positions the holds take from this node's budget (SessionManager adds them to its reserved ones). */
  get tokens(): number {
    this.sweep()
    let bytes = 0
    for (const h of this.holds.values()) bytes += h.bytes
    return Math.ceil(bytes / this.init.bytesPerToken)
  }

  get size(): number {
    return this.holds.size
  }

  /** The hold of `client`'s session `sourceSessionId` for span [start, end), if kept here. */
  get(client: string, sourceSessionId: string, start: number, end: number): Hold | undefined {
    this.sweep()
    const h = this.holds.get(holdKey(client, sourceSessionId, start, end))
    if (h) h.usedAtMs = this.now()
    return h
  }

  /**
   * Where a checked grant's frames go: a new hold (from position 0) or the client's hold of that
   * session and span, which must end where the grant starts. Nothing is kept until commit().
   */
  begin(grant: KvGrant): { hold: Hold; fresh: boolean } {
    const key = holdKey(grant.clientPeerId, grant.sourceSessionId, grant.start, grant.end)
    this.sweep()
    const old = this.holds.get(key)
    if (old) {
      if (old.length !== grant.fromPosition)
        throw new KvGrantWrongSpanError(`KV refused: the hold ends at ${old.length}, the grant moves from ${grant.fromPosition}`)
      if (old.source !== grant.sourcePeerId)
        throw new KvGrantWrongSpanError(`KV refused: the hold was fed by ${old.source}, not ${grant.sourcePeerId}`)
      return { hold: old, fresh: false }
    }
    if (grant.fromPosition !== 0)
      throw new KvGrantWrongSpanError(`KV refused: no hold here, the grant moves from ${grant.fromPosition}`)
    let owned = 0
    for (const h of this.holds.values()) if (h.client === grant.clientPeerId) owned++
    if (owned >= MAX_HOLDS_PER_CLIENT) throw new BusyError(`this peer holds ${owned} holds for you, the cap`)
    const hold: Hold = {
      client: grant.clientPeerId,
      source: grant.sourcePeerId,
      sourceSessionId: grant.sourceSessionId,
      start: grant.start,
      end: grant.end,
      frames: [],
      length: 0,
      bytes: 0,
      usedAtMs: this.now()
    }
    return { hold, fresh: true }
  }

  /** Before a frame is kept: its bytes must fit the node's free KV budget (BUSY otherwise). */
  reserve(bytes: number): void {
    const free = this.init.freeTokens()
    if (Math.ceil(bytes / this.init.bytesPerToken) > free)
      throw new BusyError(`holding ${bytes} more sealed bytes passes this node's KV cap (${free} positions free)`)
  }

  /** Keep the frames of a completed grant: the hold now covers [0, grant.toPosition). */
  commit(grant: KvGrant, hold: Hold, frames: readonly HeldFrame[], bytes: number, fresh: boolean): void {
    if (frames.length === 0) throw new MalformedMessageError('kv-move: a hold transfer without snapshots')
    hold.frames.push(...frames)
    hold.length = grant.toPosition
    hold.bytes += bytes
    hold.usedAtMs = this.now()
    if (fresh) this.holds.set(holdKey(hold.client, hold.sourceSessionId, hold.start, hold.end), hold)
  }

  private sweep(): void {
    const cutoff = this.now() - HOLD_IDLE_MS
    for (const [k, h] of this.holds) if (h.usedAtMs < cutoff) this.holds.delete(k)
  }
}

function holdKey(client: string, sourceSessionId: string, start: number, end: number): string {
  return `${client}\n${sourceSessionId}\n${start}:${end}`
}
