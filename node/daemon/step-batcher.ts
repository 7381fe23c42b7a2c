/**
 * Continuous batching of steps on a node (issue #18). Steps wait in one FIFO queue; whenever
 * the span is free, the oldest step and every later queued step that can join it (same span,
 * another session, rows within the batch cap) run as one batched forward (Shard.forwardBatch).
 * Steps that arrive meanwhile join the next batch, so new sessions join between steps. The
 * oldest step always starts the next batch, so no session waits behind later ones; beyond
 * `maxQueued` waiting steps a step gets BUSY at once. A batch that throws is re-run step by
 * step, so one session's failure never fails another session's step.
 */
import type { AbortOptions } from '@libp2p/interface'
import { BusyError } from '../../protocol/index.js'
import { InvalidBatchOptionsError, StepAbortedError, StepBatchResultError } from '../errors.js'

export interface BatchJob<I> {
  /** Jobs of one key (a session) never share a batch: the second depends on the first's KV. */
  readonly key: string
  /** Only jobs of the same group (the blocks a session runs) share a batch. */
  readonly group: string
  readonly rows: number
  readonly input: I
}

export interface StepBatcherInit<I, O> {
  /** Jobs waiting at once (not counting the batch running); more get BusyError. */
  readonly maxQueued: number
  /** Rows one batch takes at most (a job with more rows runs alone). */
  readonly maxBatchRows: number
  /** Wait this long after the first queued job before a batch starts (0: the next turn of the event loop). */
  readonly gatherMs?: number
  /** Runs a batch: one result or Error per job, in order. Throwing fails the whole batch (then re-run per job). */
  readonly run: (jobs: readonly BatchJob<I>[]) => Array<O | Error>
  /** Told of each batch that ran: jobs and rows in it. */
  readonly onBatch?: (jobs: number, rows: number) => void
}

interface Waiting<I, O> {
  readonly job: BatchJob<I>
  resolve(o: O): void
  reject(e: Error): void
  cleanup(): void
}

export class StepBatcher<I, O> {
  private readonly queue: Waiting<I, O>[] = []
  private scheduled = false
  private running = false
  /** Batches run and jobs in them (for metrics and tests). */
  batches = 0
  jobs = 0
  /** Steps refused with BUSY since start. */
  busy = 0

  constructor(private readonly init: StepBatcherInit<I, O>) {
    if (!Number.isInteger(init.maxQueued) || init.maxQueued < 1)
      throw new InvalidBatchOptionsError(`maxQueued must be a positive integer`)
    if (!Number.isInteger(init.maxBatchRows) || init.maxBatchRows < 1) {
      throw new InvalidBatchOptionsError(`maxBatchRows must be a positive integer`)
    }
    if (!(Number.isFinite(init.gatherMs ?? 0) && (init.gatherMs ?? 0) >= 0))
      throw new InvalidBatchOptionsError(`gatherMs must be ≥ 0`)
  }

  /** Steps waiting for the span now (announced with the span, so clients route around a queue). */
  get queued(): number {
    return this.queue.length
  }

  /** Queue a job; resolves with its result once its batch ran. BusyError when the queue is full. */
  submit(job: BatchJob<I>, { signal }: AbortOptions = {}): Promise<O> {
    signal?.throwIfAborted()
    if (this.queue.length >= this.init.maxQueued) {
      this.busy++
      return Promise.reject(new BusyError(`${this.queue.length} steps are waiting for this span, the cap`))
    }
    return new Promise<O>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.queue.indexOf(w)
        if (i >= 0) this.queue.splice(i, 1)
        reject(signal?.reason ?? new StepAbortedError('aborted'))
      }
      const w: Waiting<I, O> = { job, resolve, reject, cleanup: () => signal?.removeEventListener('abort', onAbort) }
      signal?.addEventListener('abort', onAbort, { once: true })
      this.queue.push(w)
      this.schedule()
    })
  }

  private schedule(): void {
    if (this.scheduled || this.running || this.queue.length === 0) return
    this.scheduled = true
    const go = (): void => {
      this.scheduled = false
      this.drain()
    }
    // setImmediate runs after the I/O callbacks of this loop turn: steps that arrived together batch
    const wait = this.init.gatherMs ?? 0
    if (wait > 0) setTimeout(go, wait)
    else setImmediate(go)
  }

  /** The next batch: the oldest job, then later ones that fit, in queue order. */
  private take(): Waiting<I, O>[] {
    const head = this.queue[0]
    const batch = [head]
    const keys = new Set([head.job.key])
    let rows = head.job.rows
    for (let i = 1; i < this.queue.length && rows < this.init.maxBatchRows; i++) {
      const { job } = this.queue[i]
      if (job.group !== head.job.group || keys.has(job.key) || rows + job.rows > this.init.maxBatchRows) continue
      batch.push(this.queue[i])
      keys.add(job.key)
      rows += job.rows
    }
    for (const w of batch) this.queue.splice(this.queue.indexOf(w), 1)
    return batch
  }

  private drain(): void {
    if (this.running || this.queue.length === 0) return
    this.running = true
    try {
      const batch = this.take()
      for (const w of batch) w.cleanup()
      this.batches++
      this.jobs += batch.length
      this.init.onBatch?.(
        batch.length,
        batch.reduce((n, w) => n + w.job.rows, 0)
      )
      const results = this.runIsolated(batch.map((w) => w.job))
      batch.forEach((w, i) => {
        const r = results[i]
        if (r instanceof Error) w.reject(r)
        else w.resolve(r)
      })
    } finally {
      this.running = false
      this.schedule()
    }
  }

  /** Run the batch; if it throws, run each job alone so only the failing one fails. */
  private runIsolated(jobs: BatchJob<I>[]): Array<O | Error> {
    try {
      const out = this.init.run(jobs)
      if (out.length !== jobs.length) throw new StepBatchResultError(`a batch of ${jobs.length} steps gave ${out.length} results`)
      return out
    } catch (err) {
      if (jobs.length === 1) return [asError(err)]
      return jobs.map((j) => {
        try {
          return this.init.run([j])[0] ?? new StepBatchResultError('a step gave no result')
        } catch (e) {
          return asError(e)
        }
      })
    }
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e))
}
