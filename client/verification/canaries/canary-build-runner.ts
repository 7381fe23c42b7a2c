import type { AbortOptions } from '@libp2p/interface'
import { DEFAULT_BACKGROUND_SHARE, runInBackground } from '../../../canary/index.js'
import type { CanaryTraceStoreOptions } from './canary-trace-store-options.js'

/** Milliseconds without a real step after which a background build takes every free turn (the client is idle). */
export const IDLE_AFTER_MS = 500

/**
 * How a canary build that does not run at once runs (issue 31): the one build under way, its
 * share of the event loop (a share between the client's real steps, every free turn once the
 * client is idle or someone waits for it), and its stop when the client closes. The trace store
 * (client/verification/canaries/canary-trace-store.ts) decides what to build; this runs it.
 */
export class CanaryBuildRunner {
  /** A build in slices under way. */
  private building?: Promise<void>
  /** A build in the background makes longer canaries: decoys wait for them (a real session's shape needs them). */
  lengthening = false
  /** Share of the event loop the background build takes now (raised while someone waits for it). */
  private share?: number
  /** When a real step last asked for the set (setFor): a build runs at full speed once none has for a while. */
  private lastStepMs = Number.NEGATIVE_INFINITY
  private readonly stop = new AbortController()

  constructor(private readonly o: Pick<CanaryTraceStoreOptions, 'backgroundShare' | 'onBuildError'>) {}

  /** A build is under way. */
  get busy(): boolean {
    return this.building !== undefined
  }

  /** Someone waits for the build under way (hurry): it reports its progress. */
  get hurried(): boolean {
    return this.share === 1
  }

  /** A real step asked for the set now. */
  stepped(): void {
    this.lastStepMs = performance.now()
  }

  /** A caller waits for the build under way: it takes every free turn from now on. */
  hurry(): void {
    this.share = 1
  }

  /** Stop a build in slices (the client is closing): nothing waits for it. */
  close(): void {
    this.stop.abort()
  }

  /** The build in slices under way, if any, done (tests, benchmarks; a client never waits for it). */
  async settled({ signal }: AbortOptions = {}): Promise<void> {
    while (this.building) {
      signal?.throwIfAborted()
      const building = this.building
      await new Promise<void>((resolve, reject) => {
        const stop = (): void => reject(signal?.reason)
        signal?.addEventListener('abort', stop, { once: true })
        building.finally(() => signal?.removeEventListener('abort', stop)).then(resolve, resolve)
      })
    }
  }

  /** Run a build job in the background (canary/background-job.ts); `done` adopts its result. */
  background<T>(job: Generator<void, T>, done: (t: T) => void): void {
    this.building = runInBackground(job, {
      signal: this.stop.signal,
      // every free turn while no real step goes on (a client between requests), else its share
      share: () =>
        this.share ??
        (performance.now() - this.lastStepMs > IDLE_AFTER_MS ? 1 : (this.o.backgroundShare ?? DEFAULT_BACKGROUND_SHARE))
    })
      .then(done)
      .catch((err: Error) => {
        if (!this.stop.signal.aborted) this.o.onBuildError?.(err)
      })
      .finally(() => {
        this.building = undefined
        this.lengthening = false
        this.share = undefined
      })
  }

  /** Run a build in slices that `start` begins with the stop signal; `done` adopts its result. */
  inSlices<T>(start: (signal: AbortSignal) => Promise<T>, done: (t: T) => void): void {
    this.building = start(this.stop.signal)
      .then(done)
      .catch((err: Error) => {
        if (!this.stop.signal.aborted) this.o.onBuildError?.(err)
      })
      .finally(() => {
        this.building = undefined
        this.lengthening = false
      })
  }
}
