import { multiaddr } from '@multiformats/multiaddr'
import {
  createSessionCaller,
  decodeTensor,
  type DType,
  encodeTensor,
  type Host,
  type HopTiming,
  type Receipt,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller
} from '../protocol/index.js'
import type { RouteHop } from './route.js'

export interface HopTarget extends RouteHop {
  readonly addrs: readonly string[]
}

export interface HopStepOutcome {
  readonly hidden: Float32Array
  readonly timings: HopTiming[]
  readonly receipts: Receipt[]
  /** Tensor data bytes sent and received, as the hop's receipt hashes them. */
  readonly sent: Uint8Array
  readonly received: Uint8Array
}

export interface HopOpenOptions {
  readonly sessionId: string
  readonly modelId: string
  readonly maxLength: number
  readonly wireDtype: DType
  readonly next?: HopTarget
  readonly upstream?: string
  readonly signal?: AbortSignal
}

/** The client's end of one hop's session stream (open, step, await, rewind, close). */
export class HopSession {
  private constructor(
    readonly target: HopTarget,
    private readonly caller: SessionCaller,
    private readonly dim: number,
    private readonly wireDtype: DType
  ) {}

  static async open(host: Host, target: HopTarget, dim: number, o: HopOpenOptions): Promise<HopSession> {
    const addrs = target.addrs.map((a) => multiaddr(a))
    const stream = await host.dialProtocol(addrs, SESSION_PROTOCOL, { ...SESSION_STREAM_LIMITS, signal: o.signal })
    const caller = createSessionCaller(stream)
    const hop = new HopSession(target, caller, dim, o.wireDtype)
    try {
      await caller.call(
        {
          type: 'open',
          open: {
            sessionId: o.sessionId,
            modelId: o.modelId,
            start: target.start,
            end: target.end,
            maxLength: o.maxLength,
            wireDtype: o.wireDtype,
            nextHops: o.next ? [{ peerId: o.next.peerId, addrs: [...o.next.addrs], start: o.next.start, end: o.next.end }] : [],
            ...(o.upstream ? { upstreamPeerId: o.upstream } : {})
          }
        },
        o.signal
      )
    } catch (err) {
      caller.abort(err as Error)
      throw err
    }
    return hop
  }

  /**
   * Run [T, dim] hidden states at startPos through this hop and return its output, with the
   * tensor bytes that went out and came back (what its receipt must hash).
   */
  async step(sessionId: string, stepId: number, startPosition: number, hidden: Float32Array, signal?: AbortSignal): Promise<HopStepOutcome> {
    const step = this.stepMessage(sessionId, stepId, startPosition, hidden, false)
    const res = await this.caller.call({ type: 'step', step }, signal)
    if (res.type !== 'result' || !res.result.hidden) throw new Error(`hop ${this.target.peerId} answered a step without output`)
    return {
      hidden: decodeTensor(res.result.hidden, { shape: [hidden.length / this.dim, this.dim] }),
      timings: res.result.timings,
      receipts: res.result.receipts ?? [],
      sent: step.hidden.data,
      received: res.result.hidden.data
    }
  }

  /** Chained mode, first hop: send; resolves with every hop's timings and receipts once the chain accepted it. */
  async stepChained(sessionId: string, stepId: number, startPosition: number, hidden: Float32Array, signal?: AbortSignal) {
    const step = this.stepMessage(sessionId, stepId, startPosition, hidden, true)
    const res = await this.caller.call({ type: 'step', step }, signal)
    const ok = res.type === 'result'
    return { timings: ok ? res.result.timings : [], receipts: ok ? (res.result.receipts ?? []) : [], sent: step.hidden.data }
  }

  /** Chained mode, last hop: the output of step stepId. */
  async awaitResult(sessionId: string, stepId: number, rows: number, signal?: AbortSignal) {
    const res = await this.caller.call({ type: 'await', await: { sessionId, stepId } }, signal)
    if (res.type !== 'result' || !res.result.hidden) throw new Error(`hop ${this.target.peerId} answered an await without output`)
    return {
      hidden: decodeTensor(res.result.hidden, { shape: [rows, this.dim] }),
      timings: res.result.timings,
      receipts: res.result.receipts ?? [],
      received: res.result.hidden.data
    }
  }

  async close(sessionId: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.caller.call({ type: 'close', close: { sessionId } }, signal ?? AbortSignal.timeout(2_000))
      await this.caller.close(signal)
    } catch {
      this.caller.abort(new Error('closing'))
    }
  }

  abort(): void {
    this.caller.abort(new Error('hop abandoned'))
  }

  private stepMessage(sessionId: string, stepId: number, startPosition: number, hidden: Float32Array, chain: boolean) {
    const rows = hidden.length / this.dim
    return { sessionId, stepId, startPosition, hidden: encodeTensor(hidden, [rows, this.dim], this.wireDtype), chain }
  }
}
