import type { CanaryPeerReport, VerificationReport } from '../../client/index.js'

/** One finished (or failed) generation, as the status page lists it. */
export interface RecentGeneration {
  readonly at: number
  readonly endpoint: 'completions' | 'chat'
  readonly promptTokens: number
  readonly completionTokens: number
  readonly ms: number
  readonly route: Array<{ peerId: string; start: number; end: number }>
  readonly failovers: number
  readonly finish: string
}

/** What a peer's canaries said, as of the latest report that covered it. */
export interface PeerTrust {
  readonly posterior: number
  readonly excluded: boolean
  readonly observations: number
  readonly canariesSent: number
  readonly updatedAt: number
}

const WINDOW_MS = 10_000

/**
 * Live numbers of the gateway for the status page and metrics: open sessions, a sliding
 * window of generated tokens (tokens/s), recent generations and the canary verdicts per peer.
 */
export class LiveStats {
  active = 0
  sessionsTotal = 0
  tokensTotal = 0
  requestsTotal = 0
  errorsTotal = 0
  readonly startedAt = Date.now()
  readonly recent: RecentGeneration[] = []
  readonly trust = new Map<string, PeerTrust>()
  /** Peer → generations whose route used it (how much traffic a peer has seen from here). */
  readonly routed = new Map<string, number>()
  private readonly tokenTimes: number[] = []

  sessionStarted(): void {
    this.active++
    this.sessionsTotal++
  }

  sessionEnded(): void {
    this.active = Math.max(0, this.active - 1)
  }

  token(now = Date.now()): void {
    this.tokensTotal++
    this.tokenTimes.push(now)
    this.prune(now)
  }

  tokensPerSecond(now = Date.now()): number {
    this.prune(now)
    const span = Math.min(WINDOW_MS, now - this.startedAt) / 1000
    return span > 0 ? this.tokenTimes.length / Math.max(span, 1) : 0
  }

  finished(g: RecentGeneration, report?: VerificationReport): void {
    this.recent.unshift(g)
    this.recent.length = Math.min(this.recent.length, 20)
    if (!report) return
    for (const hop of new Set(report.routes.flat().map((h) => h.peerId))) this.routed.set(hop, (this.routed.get(hop) ?? 0) + 1)
    this.record(report.canaries)
  }

  record(canaries: readonly CanaryPeerReport[]): void {
    for (const c of canaries) {
      this.trust.set(c.peerId, {
        posterior: c.posterior,
        excluded: c.excluded,
        observations: c.observations,
        canariesSent: c.canariesSent,
        updatedAt: Date.now()
      })
    }
  }

  private prune(now: number): void {
    let i = 0
    while (i < this.tokenTimes.length && this.tokenTimes[i] < now - WINDOW_MS) i++
    if (i > 0) this.tokenTimes.splice(0, i)
  }
}
