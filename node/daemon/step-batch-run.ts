/**
 * The node's side of continuous batching (issue #18): queued steps of its sessions go through
 * a StepBatcher into Shard.forwardBatch. This is the one way a node runs a step: per step it checks
 * the shape, answers a retried step from the last output, lets an upstream's step ids only go up
 * and requires the session still open, so a step in a batch of one is a plain step.
 */

import type { AbortOptions } from '@libp2p/interface'
import { BadShapeError, UnauthorizedError, UnknownSessionError } from '../../protocol/index.js'
import type { ShardLike } from '../../shards/index.js'
import { isRetryOfLast, type NodeSession, stepInputHash } from './node-session.js'
import { DemandMeter } from './placement/demand-meter.js'
import type { SessionManager } from './session-manager.js'
import { type BatchJob, StepBatcher } from './step-batcher.js'

export interface QueuedStep {
  readonly session: NodeSession
  readonly stepId: number
  readonly startPosition: number
  readonly hidden: Float32Array
  readonly fromUpstream: boolean
}

/** A step's output; `duplicate` when it was a retry of the session's last step, answered again. */
export interface StepOutcome {
  readonly output: Float32Array
  readonly computeMs: number
  readonly duplicate: boolean
}

export interface NodeStepQueueInit {
  readonly shard: ShardLike
  readonly sessions: SessionManager
  readonly maxQueued: number
  readonly maxBatchRows: number
  readonly gatherMs?: number
  readonly onBatch?: (jobs: number, rows: number) => void
}

/** Runs a node's steps batched across its sessions; see StepBatcher for the order and the cap. */
export class NodeStepQueue {
  private readonly batcher: StepBatcher<QueuedStep, StepOutcome>
  /** Tokens asked of the span (issue 33: the demand announced for join). */
  readonly demand = new DemandMeter()

  constructor(private readonly init: NodeStepQueueInit) {
    this.batcher = new StepBatcher({
      maxQueued: init.maxQueued,
      maxBatchRows: init.maxBatchRows,
      gatherMs: init.gatherMs,
      onBatch: init.onBatch,
      run: (jobs) => this.run(jobs)
    })
  }

  /** Steps waiting for the span now. */
  get queued(): number {
    return this.batcher.queued
  }

  get stats(): { batches: number; steps: number; busy: number } {
    return { batches: this.batcher.batches, steps: this.batcher.jobs, busy: this.batcher.busy }
  }

  /** Queue a step of an authorized session; BusyError when too many steps wait already. */
  async enqueue(q: QueuedStep, options: AbortOptions = {}): Promise<StepOutcome> {
    const dim = this.init.shard.config.dim
    if (q.hidden.length === 0 || q.hidden.length % dim !== 0) {
      throw new BadShapeError(`hidden states of ${q.hidden.length} values are not rows of ${dim}`)
    }
    const job = { key: q.session.key, group: `${q.session.start}-${q.session.end}`, rows: q.hidden.length / dim, input: q }
    this.demand.add(job.rows)
    return await this.batcher.submit(job, options)
  }

  private run(jobs: readonly BatchJob<QueuedStep>[]): Array<StepOutcome | Error> {
    const { sessions, shard } = this.init
    const inputHashes = new Map<QueuedStep, Uint8Array>()
    const results: Array<StepOutcome | Error | undefined> = jobs.map(({ input: q, rows }) => {
      if (!sessions.isOpen(q.session)) return new UnknownSessionError(`session ${q.session.id} was closed while its step waited`)
      inputHashes.set(q, stepInputHash(q.hidden))
      if (isRetryOfLast(q.session, q.stepId, q.startPosition, rows, inputHashes.get(q)!)) {
        return { output: q.session.last!.output, computeMs: 0, duplicate: true }
      }
      if (q.fromUpstream && q.stepId <= q.session.upstreamStepId) {
        return new UnauthorizedError(
          `step ${q.stepId} is not above step ${q.session.upstreamStepId}: an upstream cannot replay a step`
        )
      }
      return undefined
    })
    const todo = jobs.filter((_, i) => results[i] === undefined)
    if (todo.length > 0) {
      const t0 = performance.now()
      let outs: Float32Array[]
      try {
        outs = shard.forwardBatch(
          todo.map(({ input: q }) => ({ id: q.session.key, hidden: q.hidden, startPos: q.startPosition }))
        )
      } finally {
        // the next steps are a network hop away: free the cores for the peers and the client
        shard.rest()
      }
      const computeMs = performance.now() - t0
      let k = 0
      jobs.forEach((job, i) => {
        if (results[i] !== undefined) return
        const q = job.input
        const output = outs[k++]
        q.session.last = {
          stepId: q.stepId,
          startPosition: q.startPosition,
          rows: job.rows,
          inputHash: inputHashes.get(q)!,
          output
        }
        sessions.touch(q.session)
        if (q.fromUpstream) q.session.upstreamStepId = q.stepId
        sessions.tokensServed += job.rows
        results[i] = { output, computeMs, duplicate: false }
      })
    }
    return results as Array<StepOutcome | Error>
  }
}
