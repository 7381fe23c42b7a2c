/**
 * What a client measures of each peer's load (issue #18: routes used only the throughput a peer
 * reported once at start, so every client picked the same route): an exponentially weighted
 * moving average of the milliseconds per block its own decode steps took on the peer, past the
 * round trip (queueing and batching included), and a fixed random tie-break per peer, so clients
 * that see the same swarm at the same moment still spread over equal replicas.
 */

/** Weight of the newest sample in the average (the older ones keep 1 - EWMA_WEIGHT). */
export const EWMA_WEIGHT = 0.3
/** Tie-break fraction: a peer's cost is raised by up to this much, differently for every client. */
export const ROUTE_JITTER = 0.05
/** Steps of more rows than this are prefill: their time says nothing of a decode step's. */
export const MAX_DECODE_ROWS = 8

export class PeerLoad {
  private readonly msPerBlock = new Map<string, number>()
  private readonly jitters = new Map<string, number>()

  constructor(private readonly random: () => number = Math.random) {}

  /**
   * A step of `rows` rows through `blocks` blocks of `peerId` took `ms` on the client's clock,
   * of which `rttMs` is the bare network round trip.
   */
  observe(peerId: string, ms: number, blocks: number, rows: number, rttMs = 0): void {
    if (!(Number.isFinite(ms) && ms >= 0 && blocks >= 1 && rows >= 1 && rows <= MAX_DECODE_ROWS)) return
    const sample = Math.max(0, ms - Math.max(0, rttMs)) / blocks
    const old = this.msPerBlock.get(peerId)
    this.msPerBlock.set(peerId, old === undefined ? sample : old + EWMA_WEIGHT * (sample - old))
  }

  /** The average ms per block measured on `peerId`, undefined before its first decode step. */
  measuredMsPerBlock(peerId: string): number | undefined {
    return this.msPerBlock.get(peerId)
  }

  /** This client's fixed tie-break for `peerId`, in [0, ROUTE_JITTER). */
  jitter(peerId: string): number {
    let j = this.jitters.get(peerId)
    if (j === undefined) {
      j = this.random() * ROUTE_JITTER
      this.jitters.set(peerId, j)
    }
    return j
  }

  forget(peerId: string): void {
    this.msPerBlock.delete(peerId)
  }
}
