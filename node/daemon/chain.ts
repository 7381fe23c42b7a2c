import type { AbortOptions } from '@libp2p/interface'
import {
  createSessionCaller,
  type HopTiming,
  type Host,
  type NextHop,
  NextHopFailedError,
  type Receipt,
  RemoteError,
  RequestTimeoutError,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller,
  type SessionRequest,
  type Step
} from '../../protocol/index.js'
import { NoNextHopError } from '../errors.js'
import type { NextHopPolicy } from './next-hop-policy.js'

/**
 * What a client hears of a next hop that could not be reached: one code (NEXT_HOP_FAILED) and
 * one text, whatever the dial error was (issue #17: ECONNREFUSED or a service's banner read as a
 * frame told a client what listens where).
 */
export const NEXT_HOP_UNREACHABLE = 'next hop unreachable'

/** A last hop's output waiting for the client's AwaitResult. */
interface Delivered {
  hidden: Step['hidden']
  timings: HopTiming[]
  receipts: Receipt[]
  sealedHead?: Uint8Array
}

/**
 * Chained forwarding state of one session on one hop (docs/design.md §2): the stream to the next
 * hop, and — on the last hop — outputs waiting for the client's AwaitResult.
 */
export class ChainLink {
  private caller?: SessionCaller
  private readonly ready = new Map<number, Delivered>()
  private readonly waiting = new Map<number, { resolve(v: Delivered): void; reject(e: Error): void }>()

  constructor(
    private readonly host: Host,
    readonly next: NextHop | undefined,
    private readonly policy: NextHopPolicy
  ) {}

  /** Send a step on to the next hop; resolves with the timings and receipts of the hops after us. */
  async forward(step: Step, options: AbortOptions = {}): Promise<{ timings: HopTiming[]; receipts: Receipt[] }> {
    const next = this.next
    if (!next) throw new NoNextHopError('no next hop')
    try {
      const caller = await this.dial(next, options)
      const res = await caller.call({ type: 'step', step }, options)
      if (res.type !== 'result') return { timings: [], receipts: [] }
      this.policy.servedStep(next.peerId) // it answered a step: outranks connection-only announcements
      return { timings: res.result.timings, receipts: res.result.receipts ?? [] }
    } catch (err) {
      this.caller?.abort(err as Error)
      this.caller = undefined
      // A later hop's own error keeps naming that hop; a dead stream names our next hop.
      if (err instanceof RemoteError) throw err
      throw new RemoteError('NEXT_HOP_FAILED', NEXT_HOP_UNREACHABLE, next.peerId, step.stepId)
    }
  }

  /**
   * One-way chained step (Step.one_way): send it on and resolve once written. The returned
   * promise rejects if the next hop (or one after it) fails this step later; it never resolves.
   */
  async send(step: Step, options: AbortOptions = {}): Promise<Promise<never>> {
    const next = this.next
    if (!next) throw new NoNextHopError('no next hop')
    let caller: SessionCaller | undefined
    try {
      caller = await this.dial(next, options)
      const { failed } = await caller.send({ type: 'step', step }, options)
      const sentOn = caller
      return failed.catch((err: Error) => {
        throw this.nextHopError(err, next, step.stepId, sentOn)
      })
    } catch (err) {
      throw this.nextHopError(err as Error, next, step.stepId, caller)
    }
  }

  private async dial(next: NextHop, { signal }: AbortOptions): Promise<SessionCaller> {
    if (this.caller) return this.caller
    // the addresses this node knows for the hop, never the client's (issue #31, next-hop-policy.ts)
    const target = await this.policy.resolve(next, { signal })
    this.caller ??= createSessionCaller(
      await this.host.dialProtocol(target, SESSION_PROTOCOL, { ...SESSION_STREAM_LIMITS, signal })
    )
    return this.caller
  }

  /** A later hop's own error keeps naming that hop; a dead stream names our next hop (and is dropped). */
  private nextHopError(err: Error, next: NextHop, stepId: number, caller?: SessionCaller): RemoteError {
    if (err instanceof RemoteError) return err
    caller?.abort(err)
    // a newer stream (dialled after this one died) stays
    if (this.caller === caller) this.caller = undefined
    return new RemoteError('NEXT_HOP_FAILED', NEXT_HOP_UNREACHABLE, next.peerId, stepId)
  }

  /** Last hop: hand a step's output to the client's AwaitResult (now or when it comes). */
  deliver(stepId: number, hidden: Step['hidden'], timings: HopTiming[], receipts: Receipt[], sealedHead?: Uint8Array): void {
    const got = { hidden, timings, receipts, ...(sealedHead ? { sealedHead } : {}) }
    const w = this.waiting.get(stepId)
    if (w) {
      this.waiting.delete(stepId)
      w.resolve(got)
      return
    }
    this.ready.set(stepId, got)
    // keep only recent outputs: a client awaits the step it just sent
    for (const id of this.ready.keys()) if (this.ready.size > 8) this.ready.delete(id)
  }

  async await(stepId: number, timeoutMs: number, { signal }: AbortOptions = {}): Promise<Delivered> {
    const got = this.ready.get(stepId)
    if (got) {
      this.ready.delete(stepId)
      return got
    }
    signal?.throwIfAborted()
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(stepId)
        reject(new RequestTimeoutError(`step ${stepId} did not arrive from upstream within ${timeoutMs} ms`))
      }, timeoutMs)
      const onAbort = (): void => this.waiting.get(stepId)?.reject(new RequestTimeoutError('aborted'))
      // `signal` is the node-wide one: a listener left on it per await would pile up forever
      const done = (): void => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
      }
      this.waiting.get(stepId)?.reject(new RequestTimeoutError(`superseded wait for step ${stepId}`))
      this.waiting.set(stepId, {
        resolve: (v) => {
          done()
          resolve(v)
        },
        reject: (e) => {
          done()
          reject(e)
        }
      })
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  close(): void {
    for (const w of this.waiting.values()) w.reject(new NextHopFailedError('session closed'))
    this.waiting.clear()
    this.ready.clear()
    this.caller?.close().catch(() => {})
    this.caller = undefined
  }
}

/** What a peer sees of a session request, without the tensor data (the `request` trace event). */
export function requestShape(req: SessionRequest): Record<string, unknown> {
  switch (req.type) {
    case 'open': {
      const o = req.open
      return {
        type: 'open',
        sessionId: o.sessionId,
        maxLength: o.maxLength,
        wire: o.wireDtype,
        next: o.nextHops.length,
        upstream: o.upstreamPeerId ?? ''
      }
    }
    case 'step': {
      const s = req.step
      return {
        type: 'step',
        sessionId: s.sessionId,
        stepId: s.stepId,
        startPosition: s.startPosition,
        shape: s.hidden.shape,
        bytes: s.hidden.data.byteLength,
        chain: s.chain,
        hopAuth: s.hopAuth?.length ?? 0
      }
    }
    case 'await':
      return { type: 'await', sessionId: req.await.sessionId, stepId: req.await.stepId }
    case 'awaitResults':
      return { type: 'awaitResults', sessionId: req.awaitResults.sessionId, stepIds: req.awaitResults.stepIds }
    default:
      return { type: req.type, sessionId: (req as unknown as Record<string, { sessionId?: string }>)[req.type]?.sessionId }
  }
}
