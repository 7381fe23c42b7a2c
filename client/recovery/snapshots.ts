import { setMaxListeners } from 'node:events'
import type { AbortOptions } from '@libp2p/interface'
import { sha256Prefixes, wrapKey } from '../../crypto/index.js'
import type { HopSession } from '../session/hop.js'

/** The sealed KV the client keeps for one span of the current route (it never opens it). */
export interface SpanSnapshots {
  readonly peerId: string
  /** The hop session the snapshots were sealed for, and its snapshot key (the client's). */
  readonly sessionId: string
  readonly snapshotKey: Uint8Array
  /** A full snapshot, then deltas, in order; ends[i] is the position sealed[i] ends at. */
  readonly sealed: Uint8Array[]
  readonly ends: number[]
  /** Positions [0, end) the snapshots cover. */
  end: number
  sequence: number
  /** Sealed bytes per position, learnt from the first export (sizes the chunks). */
  bytesPerPosition: number
}

export interface SnapshotKeeperInit {
  /** Ask every hop for a sealed delta each time this many positions were added (0: only on handoff). */
  readonly every: number
  readonly dim: number
  readonly log?: (e: Record<string, unknown>) => void
  /**
   * Peers convicted (canaries, replayed receipts): AES-GCM proves who sealed a snapshot, not that
   * its KV is right, so a convicted peer's snapshots are discarded and its span replayed.
   */
  readonly isConvicted?: (peerId: string) => boolean
}

/**
 * Snapshots travel in frames of about this size: fresh large buffers are slow on this kind of VM
 * (first touch of new pages), and protobuf encoding, framing and Noise each copy a frame once;
 * frames of a few MiB reuse warm memory and let transfer, opening and import overlap.
 */
export const SNAPSHOT_CHUNK_BYTES = 4 * 1024 * 1024
/** Positions of the first export of a span, before its bytes per position are known. */
const FIRST_CHUNK_POSITIONS = 16

/**
 * Sealed KV snapshots the client keeps for fast failover (issue 6 part 4b): every `every`
 * positions each hop of the route seals the delta since its last snapshot under the session's
 * snapshot key (a full one first), in chunks of about SNAPSHOT_CHUNK_BYTES. When the route changes
 * and every hop of the new route runs a span the client holds snapshots for, each new hop imports
 * them (the snapshot key wrapped to its verified X25519 key; frames pipelined, each appending to
 * the last) and only the positions after the snapshots are replayed.
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
  /** Sealed KV bytes that crossed the client's link: exported to it, imported from it (issue #41 counts them). */
  receivedBytes = 0
  sentBytes = 0

  constructor(private readonly init: SnapshotKeeperInit) {}

  private prefixHashes(history: Float32Array, ends: readonly number[]): Uint8Array[] {
    const bytes = new Uint8Array(history.buffer, history.byteOffset, history.byteLength)
    return sha256Prefixes(
      bytes,
      ends.map((e) => e * this.init.dim * 4)
    )
  }

  /** The snapshots held for a live hop of the current route (a standby is fed from them). */
  held(hop: HopSession): SpanSnapshots | undefined {
    const s = this.spans.get(spanKey(hop))
    return s && s.sessionId === hop.sessionId && s.peerId === hop.target.peerId ? s : undefined
  }

  /** After a step: seal a delta on every hop once `every` positions have been added since the last. */
  async capture(
    hops: readonly HopSession[],
    history: Float32Array,
    length: number,
    force = false,
    options: AbortOptions = {}
  ): Promise<boolean> {
    if (!force && this.init.every <= 0) return false
    const last = Math.max(this.baseline, Math.min(...hops.map((h) => this.spans.get(spanKey(h))?.end ?? 0)))
    if (!force && length - last < this.init.every) return false
    await Promise.all(
      hops.map(async (hop) => {
        let s = this.held(hop)
        if (!s) {
          s = {
            peerId: hop.target.peerId,
            sessionId: hop.sessionId,
            snapshotKey: hop.snapshotKey,
            sealed: [],
            ends: [],
            end: 0,
            sequence: 0,
            bytesPerPosition: 0
          }
          this.spans.set(spanKey(hop), s)
        }
        try {
          await this.exportRange(hop, s, history, length, options)
        } catch (err) {
          // A dead hop is found by the next step; its older snapshots stay usable.
          this.init.log?.({ event: 'snapshot-failed', peerId: hop.target.peerId, message: (err as Error).message })
        }
      })
    )
    return true
  }

  /**
   * Seal [s.end, to) on the hop in chunks of about SNAPSHOT_CHUNK_BYTES, each bound to its own
   * prefix and sequence number; the requests are pipelined on the hop's stream.
   */
  private async exportRange(
    hop: HopSession,
    s: SpanSnapshots,
    history: Float32Array,
    to: number,
    { signal }: AbortOptions = {}
  ): Promise<void> {
    while (s.end < to) {
      const per =
        s.bytesPerPosition > 0 ? Math.max(1, Math.floor(SNAPSHOT_CHUNK_BYTES / s.bytesPerPosition)) : FIRST_CHUNK_POSITIONS
      // until the size per position is known, one chunk; then the rest at once
      const ends: number[] = []
      for (let e = s.end; e < to && (s.bytesPerPosition > 0 || ends.length === 0); ) ends.push((e = Math.min(to, e + per)))
      const hashes = this.prefixHashes(history, ends)
      pipelined(signal, ends.length)
      const sealed = await Promise.all(
        ends.map((end, i) => {
          const from = i === 0 ? s.end : ends[i - 1]
          return hop.exportKv({ from, to: end, sequence: s.sequence + 1 + i, prefixHash: hashes[i], delta: from > 0 }, { signal })
        })
      )
      if (s.bytesPerPosition === 0) s.bytesPerPosition = sealed[0].length / (ends[0] - s.end)
      for (const b of sealed) this.receivedBytes += b.length
      s.sealed.push(...sealed)
      s.ends.push(...ends)
      s.sequence += ends.length
      s.end = ends[ends.length - 1]
    }
  }

  /**
   * Planned leave: a hop answered LEAVING, so every hop of the route seals what it holds up to
   * `length` now (the leaving one still exports); the next route restores from it with no replay.
   */
  async handoff(hops: readonly HopSession[], history: Float32Array, length: number, options: AbortOptions = {}): Promise<void> {
    await this.capture(hops, history, length, true, options)
    this.init.log?.({ event: 'handoff', positions: length, route: hops.map((h) => h.target.peerId) })
  }

  /**
   * Import s.sealed[first..] into `hop`'s session (fresh when first is 0, else
   * appending), grouped into frames of about SNAPSHOT_CHUNK_BYTES and pipelined; returns the
   * positions the hop then holds. The snapshot key is wrapped to the hop's verified X25519 key.
   */
  async importInto(
    hop: HopSession,
    s: SpanSnapshots,
    first: number,
    history: Float32Array,
    wrappedKey?: Uint8Array,
    { signal }: AbortOptions = {}
  ): Promise<number> {
    const key = wrappedKey ?? wrapFor(hop, s.snapshotKey)
    const groups: Array<{ snapshots: Uint8Array[]; end: number }> = []
    let bytes = Number.POSITIVE_INFINITY
    for (let i = first; i < s.sealed.length; i++) {
      if (bytes + s.sealed[i].length > SNAPSHOT_CHUNK_BYTES) {
        groups.push({ snapshots: [], end: 0 })
        bytes = 0
      }
      const g = groups[groups.length - 1]
      g.snapshots.push(s.sealed[i])
      g.end = s.ends[i]
      bytes += s.sealed[i].length
      this.sentBytes += s.sealed[i].length
    }
    const hashes = this.prefixHashes(
      history,
      groups.map((g) => g.end)
    )
    pipelined(signal, groups.length)
    const lengths = await Promise.all(
      groups.map((g, i) =>
        hop.importKv(
          {
            wrappedKey: key,
            snapshots: g.snapshots,
            snapshotSessionId: s.sessionId,
            prefixHash: hashes[i],
            append: first > 0 || i > 0
          },
          { signal }
        )
      )
    )
    return lengths[lengths.length - 1] ?? 0
  }

  /**
   * On a new route: the snapshots held for each of its hops' spans (undefined where none, or
   * where a convicted peer sealed them), and the store starts over at `upTo` (new sessions, new
   * keys). KvRecovery decides what to import.
   */
  takeFor(hops: readonly HopSession[], upTo: number): Array<SpanSnapshots | undefined> {
    const held = hops.map((h) => {
      const s = this.spans.get(spanKey(h))
      if (s && this.init.isConvicted?.(s.peerId)) {
        this.init.log?.({ event: 'snapshots-discarded', peerId: s.peerId, span: spanKey(h), positions: s.end })
        return undefined
      }
      return s
    })
    this.spans = new Map()
    this.baseline = upTo
    return held
  }
}

/** Pipelined calls each listen to the one signal of the request: not a leak, so no warning. */
function pipelined(signal: AbortSignal | undefined, calls: number): void {
  if (signal && calls >= 8) setMaxListeners(calls + 16, signal)
}

/** The snapshot key wrapped so only `hop` can unwrap it, for its session and span. */
export function wrapFor(hop: HopSession, snapshotKey: Uint8Array): Uint8Array {
  return wrapKey(snapshotKey, hop.hopX25519PublicKey, {
    recipientPeerId: hop.target.peerId,
    sessionId: hop.sessionId,
    span: [hop.target.start, hop.target.end]
  })
}

export function spanKey(h: HopSession): string {
  return `${h.target.start}:${h.target.end}`
}
