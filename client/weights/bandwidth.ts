import { setTimeout as sleep } from 'node:timers/promises'
import type { AbortOptions } from '@libp2p/interface'

/**
 * Issue 33: a seeder's upload cap. A token bucket of `bytesPerSecond` that holds at most one
 * second of tokens; `take` waits until the bytes may go. Infinity (or 0: no cap) never waits.
 */
export class ByteRate {
  private tokens: number
  private last = performance.now()
  private queue: Promise<void> = Promise.resolve()

  constructor(readonly bytesPerSecond: number) {
    this.tokens = bytesPerSecond
  }

  get capped(): boolean {
    return Number.isFinite(this.bytesPerSecond) && this.bytesPerSecond > 0
  }

  /** Wait until `bytes` may be sent (callers queue in order, so a large chunk is not starved). */
  async take(bytes: number, { signal }: AbortOptions = {}): Promise<void> {
    if (!this.capped) return
    const turn = this.queue.then(async () => {
      for (;;) {
        const now = performance.now()
        this.tokens = Math.min(this.bytesPerSecond, this.tokens + ((now - this.last) / 1000) * this.bytesPerSecond)
        this.last = now
        // a chunk larger than a second's worth goes once the bucket is full, and leaves it in debt
        if (this.tokens >= Math.min(bytes, this.bytesPerSecond)) {
          this.tokens -= bytes
          return
        }
        const waitMs = ((Math.min(bytes, this.bytesPerSecond) - this.tokens) / this.bytesPerSecond) * 1000
        await sleep(Math.max(1, Math.ceil(waitMs)), undefined, { signal })
      }
    })
    this.queue = turn.catch(() => {})
    await turn
  }
}
