/**
 * Activation bytes on the wire of one session, per hop and dtype, for the generate report.
 * Counted from the encoded tensors the client sends and receives; in chained mode the
 * hop-to-hop links carry tensors the client does not see, so those are the exact sizes of
 * the rows it sent in the link's negotiated dtype (tensorByteLength, what the hop encodes).
 * Transport and protocol framing (receipts, Noise, yamux) is not in these numbers:
 * `npm run bench -- wire` measures that too, from the sockets.
 */
import type { DType } from '../../protocol/index.js'
import type { RouteHop } from '../routing/route.js'
import type { WirePreference } from './wire-negotiation.js'

export interface WireHopReport {
  readonly peerId: string
  readonly start: number
  readonly end: number
  readonly wireDtype: DType
  /** Activation bytes this hop received (from the client or, chained, from its upstream hop). */
  readonly bytesIn: number
  /** Activation bytes this hop sent (to the client or, chained, to its next hop). */
  readonly bytesOut: number
}

export interface WireReport {
  /** What the client asked for (auto, f32, f16 or q8_0). */
  readonly requested: string
  /** Every hop of every route the session used, with the dtype negotiated for it. */
  readonly hops: WireHopReport[]
  /** Activation bytes over all links (each transfer counted once). */
  readonly activationBytes: number
  /** Positions the client sent into the remote span (prompt rows, generated tokens, replays). */
  readonly positions: number
  /** activationBytes / positions, rounded to a byte. */
  readonly bytesPerToken: number
}

interface HopTotals {
  peerId: string
  start: number
  end: number
  wireDtype: DType
  bytesIn: number
  bytesOut: number
}

export class WireLedger {
  private readonly hops = new Map<string, HopTotals>()
  private bytes = 0
  private positions = 0

  /** `remoteStart`: the first remote block (a transfer from the client into it counts positions). */
  constructor(
    private readonly remoteStart: number,
    private readonly requested: WirePreference
  ) {}

  /** One tensor on one link: from a hop (or the client: undefined) to a hop (or the client). */
  transfer(from: RouteHop | undefined, to: RouteHop | undefined, dtype: DType, bytes: number, rows: number): void {
    this.bytes += bytes
    if (from) this.hop(from, dtype).bytesOut += bytes
    if (to) this.hop(to, dtype).bytesIn += bytes
    if (!from && to && to.start === this.remoteStart) this.positions += rows
  }

  report(): WireReport {
    return {
      requested: this.requested,
      hops: [...this.hops.values()].map((h) => ({ ...h })),
      activationBytes: this.bytes,
      positions: this.positions,
      bytesPerToken: this.positions > 0 ? Math.round(this.bytes / this.positions) : 0
    }
  }

  private hop(h: RouteHop, dtype: DType): HopTotals {
    const key = `${h.peerId}/${h.start}/${h.end}/${dtype}`
    let t = this.hops.get(key)
    if (!t) this.hops.set(key, (t = { peerId: h.peerId, start: h.start, end: h.end, wireDtype: dtype, bytesIn: 0, bytesOut: 0 }))
    return t
  }
}
