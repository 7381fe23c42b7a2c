import { sha256, wrapKey } from '../crypto/index.js'
import type { HopSession } from './hop.js'

/** The sealed KV the client keeps for one span of the current route (it never opens it). */
interface SpanSnapshots {
  readonly peerId: string
  /** The hop session the snapshots were sealed for, and its snapshot key (the client's). */
  readonly sessionId: string
  readonly snapshotKey: Uint8Array
  /** A full snapshot, then deltas, in order. */
  readonly sealed: Uint8Array[]
  /** Positions [0, end) the snapshots cover. */
  end: number
  sequence: number
}

export interface SnapshotKeeperInit {
  /** Ask every hop for a sealed delta each time this many positions were added (0: only on handoff). */
  readonly every: number
  readonly dim: number
  readonly log?: (e: Record<string, unknown>) => void
}

/**
 * Sealed KV snapshots the client keeps for fast failover (issue 6 part 4b): every `every`
 * positions each hop of the route seals the delta since its last snapshot under the session's
 * snapshot key (a full one first). When the route changes and every hop of the new route runs a
 * span the client holds snapshots for, each new hop imports them (the snapshot key wrapped to
 * its verified X25519 key) and only the positions after the snapshots are replayed.
 * The prefix hash bound into each snapshot is SHA-256 of the input rows [0, end) as f32 bytes,
 * which the client recomputes from its own history before a restore.
 */
export class SnapshotKeeper {
  private spans = new Map<string, SpanSnapshots>()
  /**
   * Where the current route's snapshots count from: a new route takes its first (full) snapshot
   * `every` positions after it started, not in the middle of resuming.
   */
  private baseline = 0

  constructor(private readonly init: SnapshotKeeperInit) {}

  private prefixHash(history: Float32Array, end: number): Uint8Array {
    return sha256(new Uint8Array(history.buffer, history.byteOffset, end * this.init.dim * 4))
  }

  /** After a step: seal a delta on every hop once `every` positions have been added since the last. */
  async capture(hops: readonly HopSession[], sessionId: string, history: Float32Array, length: number, signal?: AbortSignal, force = false): Promise<void> {
    if (!force && this.init.every <= 0) return
    const last = Math.max(this.baseline, Math.min(...hops.map((h) => this.spans.get(spanKey(h))?.end ?? 0)))
    if (!force && length - last < this.init.every) return
    const prefixHash = this.prefixHash(history, length)
    await Promise.all(
      hops.map(async (hop) => {
        const key = spanKey(hop)
        let s = this.spans.get(key)
        if (s && (s.sessionId !== sessionId || s.peerId !== hop.target.peerId)) s = undefined
        const from = s?.end ?? 0
        if (from >= length) return
        const sequence = (s?.sequence ?? 0) + 1
        try {
          const sealed = await hop.exportKv(sessionId, from, length, sequence, prefixHash, from > 0, signal)
          if (!s) {
            s = { peerId: hop.target.peerId, sessionId, snapshotKey: hop.snapshotKey, sealed: [], end: 0, sequence: 0 }
            this.spans.set(key, s)
          }
          s.sealed.push(sealed)
          s.end = length
          s.sequence = sequence
        } catch (err) {
          // A dead hop is found by the next step; its older snapshots stay usable.
          this.init.log?.({ event: 'snapshot-failed', peerId: hop.target.peerId, message: (err as Error).message })
        }
      })
    )
  }

  /**
   * Planned leave: a hop answered LEAVING, so every hop of the route seals what it holds up to
   * `length` now (the leaving one still exports); the next route restores from it with no replay.
   */
  async handoff(hops: readonly HopSession[], sessionId: string, history: Float32Array, length: number, signal?: AbortSignal): Promise<void> {
    await this.capture(hops, sessionId, history, length, signal, true)
    this.init.log?.({ event: 'handoff', positions: length, route: hops.map((h) => h.target.peerId) })
  }

  /**
   * On a new route, before replay: when every hop runs a span we hold snapshots for, import
   * them; returns the position replay must start from (0: no restore, replay everything).
   */
  async restore(hops: readonly HopSession[], sessionId: string, history: Float32Array, upTo: number, signal?: AbortSignal): Promise<number> {
    const held = hops.map((h) => this.spans.get(spanKey(h)))
    const spans = held.filter((s): s is SpanSnapshots => s !== undefined && s.end > 0 && s.end <= upTo)
    this.spans = new Map() // the new route's snapshots start over: new sessions, new keys
    this.baseline = upTo
    if (spans.length !== hops.length) return 0
    const from = Math.min(...spans.map((s) => s.end))
    await Promise.all(
      hops.map(async (hop, i) => {
        const s = spans[i]
        const wrappedKey = wrapKey(s.snapshotKey, hop.hopX25519PublicKey, { recipientPeerId: hop.target.peerId, sessionId, span: [hop.target.start, hop.target.end] })
        const prefixHash = this.prefixHash(history, s.end)
        const length = await hop.importKv(sessionId, { wrappedKey, snapshots: s.sealed, snapshotSessionId: s.sessionId, prefixHash }, signal)
        if (length !== s.end) throw new Error(`hop ${hop.target.peerId} restored ${length} positions, not ${s.end}`)
        this.init.log?.({ event: 'restore', peerId: hop.target.peerId, fromSnapshot: s.end, replayed: upTo - from })
      })
    )
    return from
  }
}

function spanKey(h: HopSession): string {
  return `${h.target.start}:${h.target.end}`
}
