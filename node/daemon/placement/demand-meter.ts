/*
 * Issue 33 (session 4): the demand a node sees, announced so `join --model-id auto` can serve the
 * model clients ask most of for what the swarm supplies: tokens of client steps asked of the span
 * over the last minute, in 5-second buckets (a sliding window without keeping every step).
 */

const BUCKET_MS = 5_000
const WINDOW_MS = 60_000

export class DemandMeter {
  private readonly buckets = new Map<number, number>()

  /** `tokens` rows of one step were asked of the span now. */
  add(tokens: number, nowMs = Date.now()): void {
    const b = Math.floor(nowMs / BUCKET_MS)
    this.buckets.set(b, (this.buckets.get(b) ?? 0) + tokens)
    this.prune(nowMs)
  }

  /** Tokens asked over the last minute. */
  perMinute(nowMs = Date.now()): number {
    this.prune(nowMs)
    let n = 0
    for (const v of this.buckets.values()) n += v
    return Math.min(n, 0xffffffff)
  }

  private prune(nowMs: number): void {
    const oldest = Math.floor((nowMs - WINDOW_MS) / BUCKET_MS)
    for (const b of this.buckets.keys()) if (b <= oldest) this.buckets.delete(b)
  }
}
