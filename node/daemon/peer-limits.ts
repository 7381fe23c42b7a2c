/**
 * Per-peer token buckets for session requests and their bytes (issue #17: one peer could keep
 * a node busy alone). Each peer's buckets fill at a steady rate up to a burst; a request that
 * finds either empty is refused with BUSY, which an honest client treats as "route elsewhere".
 */
import { BusyError } from '../../protocol/index.js'
import { DEFAULT_PEER_LIMITS, type PeerLimitOptions } from '../options.js'

interface Buckets {
  requests: number
  bytes: number
  atMs: number
}

export class PeerLimits {
  private readonly peers = new Map<string, Buckets>()
  private readonly o: PeerLimitOptions

  constructor(
    options: Partial<PeerLimitOptions> = {},
    private readonly now: () => number = Date.now
  ) {
    this.o = { ...DEFAULT_PEER_LIMITS, ...options }
    for (const [k, v] of Object.entries(this.o))
      if (!(typeof v === 'number' && v > 0 && Number.isFinite(v))) throw new RangeError(`${k} must be a positive number`)
  }

  /** Peers whose buckets are remembered now (at most maxTrackedPeers). */
  get tracked(): number {
    return this.peers.size
  }

  /** Takes one request of `bytes` from `peer`'s buckets, or throws BusyError and takes nothing. */
  take(peer: string, bytes: number): void {
    const t = this.now()
    let b = this.peers.get(peer)
    if (b === undefined) {
      if (this.peers.size >= this.o.maxTrackedPeers) this.prune(t)
      b = { requests: this.o.requestBurst, bytes: this.o.byteBurst, atMs: t }
      this.peers.set(peer, b)
    }
    const s = Math.max(0, t - b.atMs) / 1000
    b.requests = Math.min(this.o.requestBurst, b.requests + s * this.o.requestsPerSecond)
    b.bytes = Math.min(this.o.byteBurst, b.bytes + s * this.o.bytesPerSecond)
    b.atMs = t
    if (b.requests < 1) throw new BusyError('request rate over the per-peer limit: slow down or route elsewhere')
    if (b.bytes < bytes) throw new BusyError('byte rate over the per-peer limit: slow down or route elsewhere')
    b.requests -= 1
    b.bytes -= bytes
  }

  /** Forget peers whose buckets are full again (they are indistinguishable from new ones). */
  private prune(t: number): void {
    for (const [peer, b] of this.peers) {
      const s = (t - b.atMs) / 1000
      if (
        b.requests + s * this.o.requestsPerSecond >= this.o.requestBurst &&
        b.bytes + s * this.o.bytesPerSecond >= this.o.byteBurst
      )
        this.peers.delete(peer)
    }
  }
}
