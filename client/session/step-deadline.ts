/*
 * A step's deadline counts the time the client could have read the answer, not time its own
 * event loop was held (issue 31, the canary-chat flake). A client that builds its canary set at
 * once (`firstAtOnceMacs`, or a growth of it) runs tens of seconds of kernels without yielding
 * while a real step is in flight; a plain AbortSignal.timeout then fires on the first turn after
 * that stall, before the answer already waiting in the socket is read (Node runs timers before
 * I/O), and the failover banned an honest peer for the client's own stall: under load that ban
 * left no route (NoRouteError). Here one process-wide sampler notes how long the loop was held
 * (ticks that came late, past STALL_GRACE_MS), and a deadline that fires re-arms for the stalled
 * time: a stalled client gives its peers their full time after it wakes, while a peer that does
 * not answer still times out after `ms` of the client's live time.
 */

/** How often the sampler looks at the clock while a deadline is pending. */
export const STALL_TICK_MS = 100
/** A tick this much later than due is a stall (of the client, or of its host under load). */
export const STALL_GRACE_MS = 100

/** The loop's held time, summed, sampled while some deadline is pending. */
class LoopStalls {
  private total = 0
  private last = 0
  private users = 0
  private timer?: ReturnType<typeof setInterval>

  constructor(private readonly now: () => number) {}

  acquire(): void {
    if (this.users++ > 0) return
    this.last = this.now()
    this.timer = setInterval(() => this.sample(), STALL_TICK_MS)
    // as AbortSignal.timeout's: a pending deadline never keeps the process alive
    this.timer.unref?.()
  }

  release(): void {
    if (--this.users > 0) return
    clearInterval(this.timer)
    this.timer = undefined
  }

  /** Milliseconds the loop was held so far, the stall going on now included. */
  sample(): number {
    const t = this.now()
    this.total += Math.max(0, t - this.last - STALL_TICK_MS - STALL_GRACE_MS)
    this.last = t
    return this.total
  }
}

const stalls = new LoopStalls(() => performance.now())

/**
 * A signal that aborts (TimeoutError, as AbortSignal.timeout's) once `ms` of the client's live
 * time has passed since the call, the time its event loop was held not counted.
 */
export function liveTimeout(ms: number): AbortSignal {
  const controller = new AbortController()
  const start = performance.now()
  stalls.acquire()
  const held0 = stalls.sample()
  const check = (): void => {
    const live = performance.now() - start - (stalls.sample() - held0)
    if (live >= ms) {
      stalls.release()
      controller.abort(new DOMException(`no answer within ${ms} ms of the client's live time`, 'TimeoutError'))
      return
    }
    setTimeout(check, Math.max(1, ms - live)).unref?.()
  }
  setTimeout(check, ms).unref?.()
  return controller.signal
}
