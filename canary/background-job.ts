import type { AbortOptions } from '@libp2p/interface'

/**
 * Share of the event loop's time a background canary build may take by default (issue 31): a
 * new client's set is built between its real steps, and a build that took every free turn held
 * each real step behind a slice (decode at 0.43× of canaries-off); at one part in five the real
 * steps keep ≥ 80 % of their rate.
 */
export const DEFAULT_BACKGROUND_SHARE = 0.2

export interface BackgroundJobOptions extends AbortOptions {
  /**
   * Share of wall time the job's slices may take, in (0, 1] (default DEFAULT_BACKGROUND_SHARE; 1:
   * every free turn); a function is read after each slice (a caller waiting for the job raises it).
   */
  readonly share?: number | (() => number)
}

/**
 * Run a sliced job (a generator that yields between slices: canary/trace.ts) in the background:
 * after a slice of t ms it rests t·(1 − share)/share ms, so it takes at most `share` of the
 * event loop and everything else (real steps, network) runs between its slices. `signal` stops
 * it at the next slice (the job's `finally` runs) and clears the rest's timer, so nothing keeps
 * the process alive after a client closes.
 */
export async function runInBackground<T>(job: Generator<void, T>, o: BackgroundJobOptions = {}): Promise<T> {
  const shareNow = (): number => {
    const share = typeof o.share === 'function' ? o.share() : (o.share ?? DEFAULT_BACKGROUND_SHARE)
    if (!(share > 0 && share <= 1)) throw new RangeError(`share must be in (0, 1], got ${share}`)
    return share
  }
  shareNow()
  const { signal } = o
  try {
    // the caller's turn first: a job started by a real step never delays that step's answer
    await rest(0, signal)
    for (;;) {
      signal?.throwIfAborted()
      const t0 = performance.now()
      const r = job.next()
      if (r.done) return r.value
      const share = shareNow()
      const restMs = ((performance.now() - t0) * (1 - share)) / share
      await rest(restMs, signal)
    }
  } finally {
    job.return(undefined as T)
  }
}

/** setImmediate when there is nothing to rest, else a timer; an abort ends the wait at once. */
function rest(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const done = (): void => {
      signal?.removeEventListener('abort', stop)
      resolve()
    }
    const timer = ms < 1 ? undefined : setTimeout(done, ms)
    const immediate = timer === undefined ? setImmediate(done) : undefined
    const stop = (): void => {
      if (timer !== undefined) clearTimeout(timer)
      if (immediate !== undefined) clearImmediate(immediate)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', stop, { once: true })
  })
}
