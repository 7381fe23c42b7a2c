import type { AbortOptions } from '@libp2p/interface'
import { type Receipt, RemoteError } from '../../protocol/index.js'
import { BadHopKeyError, BadReceiptError } from '../errors.js'
import type { ReceiptLedger } from '../verification/receipts.js'
import { type HeadChannel, headRecord } from './head-channel.js'
import type { HopSession, HopTarget } from './hop.js'
import type { PipelineObserver } from './pipeline-observer.js'
import { liveTimeout } from './step-deadline.js'

export type Forwarding = 'relay' | 'chain'

/** One hop's part in a step, as the `step` log event reports it (rttMs: relayed mode only). */
export interface StepHopTiming {
  readonly peerId: string
  readonly computeMs: number
  readonly rttMs?: number
}

export interface StepTransportInit {
  readonly dim: number
  readonly forwarding: Forwarding
  /** The pipeline's session id (the `step` log event names it; each route's hop sessions add a suffix). */
  readonly sessionId: string
  /** Every hop's signed receipt is checked here. */
  readonly receipts: ReceiptLedger
  readonly log?: (e: Record<string, unknown>) => void
  /** Told of every chained step once its receipts passed, off the critical path (canary audits). */
  readonly observers?: readonly PipelineObserver[]
  /**
   * Told how long each hop took for a step (ms on the client's clock, relayed: its round trip;
   * chained: its reported compute and an equal share of the rest), for load-aware routes.
   */
  readonly onHopTime?: (peerId: string, ms: number, rows: number, blocks: number) => void
  /** Issue #35: the head request for the last hop, and where its sealed reply goes. */
  readonly head?: HeadChannel
}

/**
 * Moves one step through a route's hop sessions, relayed or chained, and checks every hop's
 * signed receipt. It knows nothing of routing or failover: a failing hop's error is thrown with
 * the hop's peer id (`blamedHopOf`, for errors that carry none), and RemotePipeline decides.
 */
export class StepTransport {
  private nextStepId = 1
  /** A chained step whose receipts failed after its output was used: fail over before the next. */
  private poisoned: BadReceiptError | undefined
  /** Receipt checks and audits of chained steps, off the critical path: drain() waits for them. */
  private readonly offPath = new Set<Promise<void>>()
  /**
   * Starts the last chained step's deferred receipt checks (see chained): called once the next
   * step is written, so they run while the hops compute, not between a token's output and its
   * next step (signature checks take ~0.1 ms each with caches cold from the kernels).
   */
  private releaseChecks: () => void = () => {}

  constructor(private readonly init: StepTransportInit) {}

  /** Throws (once) the bad receipt a chained step's off-path check found, so the caller fails over. */
  throwIfPoisoned(): void {
    const err = this.poisoned
    this.poisoned = undefined
    if (err) throw err
  }

  /**
   * Run `hidden` at startPos through `hops` (the route `route`); the last hop's output. `deadline`
   * makes a step's deadline: one per hop relayed, one for the whole step chained.
   */
  async run(
    hops: readonly HopSession[],
    route: readonly HopTarget[],
    hidden: Float32Array,
    startPos: number,
    deadline: () => AbortSignal
  ): Promise<Float32Array> {
    const stepId = this.nextStepId++
    if (this.init.forwarding === 'relay' || hops.length === 1) return await this.relayed(hops, stepId, hidden, startPos, deadline)
    return await this.chained(hops, route, stepId, hidden, startPos, deadline())
  }

  /** Let the last chained step's deferred checks start now (the session is closing). */
  release(): void {
    this.releaseChecks()
  }

  /** Off-path checks still running. */
  pending(): Promise<unknown> {
    return Promise.all(this.offPath)
  }

  private async relayed(
    hops: readonly HopSession[],
    stepId: number,
    hidden: Float32Array,
    startPos: number,
    deadline: () => AbortSignal
  ): Promise<Float32Array> {
    const rows = hidden.length / this.init.dim
    const t0 = performance.now()
    let h = hidden
    const timings: StepHopTiming[] = []
    const seen = { inputs: [] as Float32Array[], outputs: [] as Float32Array[], receipts: [] as (Receipt | undefined)[] }
    // A hop's receipt is checked while the next hop computes: setImmediate starts the check
    // after the loop has sent the step on to the next hop, and every check has passed, in
    // route order, before the step's output is used.
    const checks: Promise<void>[] = []
    const checked = async (): Promise<void> => {
      for (const c of checks) await c
    }
    try {
      for (const hop of hops) {
        const t = performance.now()
        const head = hop === hops[hops.length - 1] ? this.init.head?.request : undefined
        const out = await tagged(hop.target.peerId, hop.sendStep(stepId, startPos, h, { signal: deadline(), head }))
        if (head) headRecord(this.init.head, hop, { stepId, position: startPos, rows }, out.sealedHead)
        const check = new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
          this.init.receipts.check(
            [hop.target],
            { sessionId: hop.sessionId, stepId, position: startPos },
            out.receipts,
            out.sent,
            out.received
          )
        )
        check.catch(() => {}) // awaited in order by checked()
        checks.push(check)
        seen.inputs.push(h)
        seen.outputs.push(out.hidden)
        seen.receipts.push(out.receipts[0])
        h = out.hidden
        timings.push({ peerId: hop.target.peerId, computeMs: out.timings[0]?.computeMs ?? 0, rttMs: performance.now() - t })
      }
    } catch (err) {
      await checked() // a bad receipt of an earlier hop is the failure to report
      throw err
    }
    await checked()
    for (const o of this.init.observers ?? []) o.relayedStepChecked?.({ hops, stepId, startPosition: startPos, ...seen })
    hops.forEach((hop, i) => {
      this.init.onHopTime?.(hop.target.peerId, timings[i].rttMs ?? 0, rows, hop.target.end - hop.target.start)
    })
    this.logStep(stepId, startPos, rows, performance.now() - t0, timings)
    return h
  }

  private async chained(
    hops: readonly HopSession[],
    route: readonly HopTarget[],
    stepId: number,
    hidden: Float32Array,
    startPos: number,
    deadline: AbortSignal
  ): Promise<Float32Array> {
    const rows = hidden.length / this.init.dim
    const t0 = performance.now()
    const first = hops[0]
    const last = hops[hops.length - 1]
    // The step is written first: it is the critical path, and the last hop keeps an output that
    // arrives before its await (node/daemon/chain.ts), so the await can follow while the hops compute.
    // One deadline for the whole chained step (a timer and AbortSignal.any cost ~50 µs each time).
    const options = { signal: deadline }
    const head = this.init.head?.request
    const sent = tagged(first.target.peerId, first.stepChained(stepId, startPos, hidden, hops.slice(1), { ...options, head }))
    const result = tagged(last.target.peerId, last.awaitResult(stepId, rows, options))
    sent.catch(() => {}) // reported through the race below when it matters
    result.catch(() => {})
    // this step is on its way: the previous step's checks may run now
    const release = this.releaseChecks
    sent.then(release, release)
    // The step goes one way; a hop that fails it reports back through the first hop (`failed`).
    const got = await Promise.race([result, sent.then((s) => tagged(first.target.peerId, s.failed))])
    const ms = performance.now() - t0
    if (head) headRecord(this.init.head, last, { stepId, position: startPos, rows }, got.sealedHead)
    this.chainedHopTimes(hops, ms, rows, got.timings)
    // The output carries every hop's receipt and compute time (each hop signed before it
    // forwarded); they are checked off the critical path, once the next step is sent (or the
    // session closes): a bad receipt poisons the route and the step after that fails over.
    let start!: () => void
    const gate = new Promise<void>((resolve) => {
      start = resolve
    })
    this.releaseChecks = start
    const offPath = gate
      .then(() => sent)
      .then(async (ack) => {
        first.settle(ack.requestId)
        this.logStep(stepId, startPos, rows, ms, got.timings)
        await this.init.receipts.check(
          route,
          { sessionId: first.sessionId, sessionIds: hops.map((h) => h.sessionId), stepId, position: startPos },
          got.receipts,
          ack.sent,
          got.received
        )
        // Observers see every chained step (canaries audit its middle hops, as decoy steps'
        // are, so an audit does not single out a decoy); a false answer poisons the route.
        const step = { hops, stepId, startPosition: startPos, rows, input: hidden, output: got.hidden, receipts: got.receipts }
        for (const o of this.init.observers ?? []) await o.chainedStepChecked?.(step)
      })
      .catch((err) => {
        if (err instanceof BadReceiptError) this.poisoned ??= err
      })
      .finally(() => this.offPath.delete(offPath))
    this.offPath.add(offPath)
    return got.hidden
  }

  /** A chained step's time per hop: each hop's reported compute and an equal share of the rest. */
  private chainedHopTimes(hops: readonly HopSession[], ms: number, rows: number, timings: readonly StepHopTiming[]): void {
    const report = this.init.onHopTime
    if (!report) return
    const compute = new Map(timings.map((t) => [t.peerId, Math.max(0, t.computeMs)]))
    const total = [...compute.values()].reduce((a, b) => a + b, 0)
    const rest = Math.max(0, ms - total) / hops.length
    for (const hop of hops) {
      const own = Math.min(compute.get(hop.target.peerId) ?? 0, ms)
      report(hop.target.peerId, own + rest, rows, hop.target.end - hop.target.start)
    }
  }

  /** A `step` log event: wall time of the remote span, and per hop its compute (and, relayed, its round trip). */
  private logStep(stepId: number, startPos: number, rows: number, ms: number, hops: StepHopTiming[]): void {
    const { sessionId, forwarding } = this.init
    this.init.log?.({ event: 'step', sessionId, forwarding, stepId, startPos, rows, ms, hops })
  }
}

/**
 * A deadline of `ms` that also follows the caller's signal: `ms` of the client's live time, the
 * time its own event loop was held not counted against the peer (step-deadline.ts, issue 31).
 */
export function stepDeadline(ms: number, { signal }: AbortOptions = {}): AbortSignal {
  const t = liveTimeout(ms)
  return signal ? AbortSignal.any([signal, t]) : t
}

/**
 * The hop each failed call was made to, kept beside the error rather than patched onto it: the
 * error stays the class its thrower made (a timeout, a dead stream, a library error).
 */
const calledHops = new WeakMap<Error, string>()

/** Errors without a peer id of their own (timeouts, dead streams) name the hop we called. */
export async function tagged<T>(peerId: string, p: Promise<T>): Promise<T> {
  try {
    return await p
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err))
    if (!(e instanceof RemoteError && e.peerId !== '')) calledHops.set(e, peerId)
    throw e
  }
}

/** The peer to blame for a failed step: the one a RemoteError names, else the hop it was called on. */
export function blamedHopOf(err: unknown): string | undefined {
  if (err instanceof RemoteError && err.peerId !== '') return err.peerId
  if (err instanceof BadHopKeyError) return err.hopPeerId
  return err instanceof Error ? calledHops.get(err) : undefined
}
