import type { AbortOptions } from '@libp2p/interface'
import { KV_HOLD_NO_KEY, KV_HOLD_SESSION_ID } from '../../protocol/index.js'
import { KvRestoreMismatchError } from '../errors.js'
import type { SwarmView } from '../routing/swarm-view.js'
import type { HopSession } from '../session/hop.js'
import { type KvMoveInit, moveKv, partyOf } from './kv-grants.js'
import { spanKey, wrapFor } from './snapshots.js'

/** How long a peer that failed to hold is not asked again. */
const HOLDER_REFUSED_MS = 60_000

/** A span's sealed KV kept on a holder peer, as the live hop sealed it. */
interface Holding {
  readonly holderPeerId: string
  readonly livePeerId: string
  readonly liveSessionId: string
  readonly span: readonly [number, number]
  /** The live session's snapshot key: the client wraps it for the replacement at failover. */
  readonly snapshotKey: Uint8Array
  /** Positions the holder keeps (its receipts say so), and the last sealed sequence. */
  end: number
  sequence: number
}

/**
 * Sealed KV on holder peers (issue #41 item 3: "the replacement imports from the standby or from
 * a peer holding sealed snapshots, under a fresh grant"). On the node path, a span of the live
 * route with no standby gets a holder: a peer of the swarm that does not serve that span (so it
 * is never the span's replacement, and a fresh peer for the span never holds its own hold); the
 * live hop's neighbour qualifies, an off-route peer is preferred. The live hop seals each delta
 * and sends it to the holder under the client's grant (destination session KV_HOLD_SESSION_ID,
 * node/daemon/kv/kv-hold.ts); the holder keeps it unopened and signs a receipt. When the hop dies,
 * the client opens a session on a fresh peer for the span and grants the holder a move of the
 * whole hold to it: the fresh peer imports node to node and checks every seal, and no KV
 * crosses the client's link. Where no holder can be had, the client keeps the snapshots.
 */
export class HolderKeeper {
  private holdings = new Map<string, Holding>()
  private readonly refusedUntilMs = new Map<string, number>()
  /** Spans already reported without a holder (logged once). */
  private readonly unavailable = new Set<string>()

  constructor(
    private readonly view: SwarmView,
    private readonly log?: (e: Record<string, unknown>) => void
  ) {}

  /**
   * Feed each hop's holder the positions it lacks, [end, length); returns the hops with no holder
   * (the caller keeps their snapshots). `exclude`: peers not to hold (standbys).
   */
  async feed(
    route: readonly HopSession[],
    hops: readonly HopSession[],
    history: Float32Array,
    length: number,
    mover: KvMoveInit,
    exclude: readonly string[],
    options: AbortOptions = {}
  ): Promise<HopSession[]> {
    const without: HopSession[] = []
    await Promise.all(
      hops.map(async (live) => {
        const key = spanKey(live)
        let h = this.holdings.get(key)
        // a new live session (a failover): its sealed KV starts again, on a holder of its own
        if (h && (h.livePeerId !== live.target.peerId || h.liveSessionId !== live.sessionId)) h = undefined
        h ??= this.pick(route, live, exclude)
        if (!h) {
          this.holdings.delete(key)
          without.push(live)
          return
        }
        this.holdings.set(key, h)
        if (h.end >= length) return
        const t0 = performance.now()
        try {
          const receipt = await moveKv(
            mover,
            {
              source: partyOf(live),
              destination: { peerId: h.holderPeerId, sessionId: KV_HOLD_SESSION_ID },
              span: h.span,
              from: h.end,
              to: length,
              firstSequence: h.sequence + 1,
              wrappedKey: KV_HOLD_NO_KEY
            },
            history,
            options
          )
          h.end = receipt.length
          h.sequence = receipt.sequence
          this.log?.({
            event: 'holder-fed',
            peerId: h.holderPeerId,
            span: [...h.span],
            positions: h.end,
            bytes: receipt.bytes,
            ms: Math.round((performance.now() - t0) * 10) / 10
          })
        } catch (err) {
          this.log?.({ event: 'holder-failed', peerId: h.holderPeerId, span: [...h.span], message: (err as Error).message })
          this.refusedUntilMs.set(h.holderPeerId, Date.now() + HOLDER_REFUSED_MS)
          this.holdings.delete(key)
          without.push(live)
        }
      })
    )
    return without
  }

  /** The positions a holder keeps for `hop`'s span (exactly it, at most `upTo`), 0 if none can serve it. */
  heldFor(hop: HopSession, upTo: number): number {
    const h = this.holdings.get(spanKey(hop))
    if (!h || h.end === 0 || h.end > upTo || h.holderPeerId === hop.target.peerId) return 0
    return this.view.isBanned(h.holderPeerId) ? 0 : h.end
  }

  /** Grant the holder a move of the whole hold into `hop`'s fresh session; the positions it then holds. */
  async restoreInto(hop: HopSession, history: Float32Array, mover: KvMoveInit, options: AbortOptions = {}): Promise<number> {
    const h = this.holdings.get(spanKey(hop))
    if (!h) throw new KvRestoreMismatchError(`no holder for span [${hop.target.start}, ${hop.target.end})`)
    const receipt = await moveKv(
      mover,
      {
        source: { peerId: h.holderPeerId, sessionId: h.liveSessionId },
        destination: partyOf(hop),
        span: h.span,
        from: 0,
        to: h.end,
        firstSequence: 1,
        sequence: h.sequence,
        wrappedKey: wrapFor(hop, h.snapshotKey)
      },
      history,
      options
    )
    return receipt.length
  }

  /** A holder for `live`'s span: not serving it, not banned nor refused; off the route first. */
  private pick(route: readonly HopSession[], live: HopSession, exclude: readonly string[]): Holding | undefined {
    const { start, end } = live.target
    const now = Date.now()
    const onRoute = new Set(route.map((h) => h.target.peerId))
    const fits = this.view
      .list()
      .filter(
        (c) =>
          !(c.start <= start && end <= c.end) &&
          !exclude.includes(c.peerId) &&
          !this.view.isBanned(c.peerId) &&
          (this.refusedUntilMs.get(c.peerId) ?? 0) <= now
      )
    const p = fits.find((c) => !onRoute.has(c.peerId)) ?? fits.find((c) => c.peerId !== live.target.peerId)
    if (!p) {
      if (!this.unavailable.has(spanKey(live))) this.log?.({ event: 'holder-unavailable', span: [start, end] })
      this.unavailable.add(spanKey(live))
      return undefined
    }
    this.unavailable.delete(spanKey(live))
    this.log?.({ event: 'holder', peerId: p.peerId, span: [start, end], livePeerId: live.target.peerId })
    return {
      holderPeerId: p.peerId,
      livePeerId: live.target.peerId,
      liveSessionId: live.sessionId,
      span: [start, end],
      snapshotKey: live.snapshotKey,
      end: 0,
      sequence: 0
    }
  }
}
