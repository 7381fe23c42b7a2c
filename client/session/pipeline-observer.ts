import type { AbortOptions } from '@libp2p/interface'
import type { Receipt } from '../../protocol/index.js'
import type { CanaryMonitor } from '../verification/canary-monitor.js'
import type { HopSession, HopTarget } from './hop.js'

/** What an observer may read of a RemotePipeline after a step: its live route and the inputs it sent. */
export interface PipelineState {
  readonly route: readonly HopTarget[]
  /** The live route's hop sessions (each knows its session id). */
  readonly hops: readonly HopSession[]
  /** Every input row sent so far, [length, dim] f32 (the route's KV is a function of it). */
  readonly history: Float32Array
  readonly length: number
  /** The session id the next route's hops will be opened under (standbys open under it ahead). */
  readonly nextSessionId: string
}

/** A real step the pipeline just completed. */
export interface CompletedStep {
  readonly startPosition: number
  readonly rows: number
  /** A speculative step's draft length (K asked for); undefined for a plain step. */
  readonly draftLength?: number
}

/** A peer an observer convicted: the pipeline bans it, leaves the route and reports why. */
export interface Exclusion {
  readonly peerId: string
  readonly why: string
  readonly posterior?: number
}

/**
 * How canaries, snapshots and standbys follow a RemotePipeline without driving it: they are told
 * of steps, chained steps' receipts, a planned leave and the session's end, and may only answer
 * with peers to exclude. Routing, failover and replay stay in RemotePipeline. Every hook is
 * optional; the pipeline awaits them in the order the observers were given.
 */
export interface PipelineObserver {
  /** After a real step's output was accepted and remembered; peers to exclude, if any. */
  stepDone?(state: PipelineState, step: CompletedStep, options?: AbortOptions): Promise<readonly Exclusion[] | undefined>
  /** A chained step's receipts passed (off the critical path); a BadReceiptError poisons the route. */
  chainedStepChecked?(hops: readonly HopSession[], stepId: number, rows: number, receipts: readonly Receipt[]): Promise<void>
  /** A hop answered LEAVING: the route is about to be left on purpose (its KV may still be exported). */
  leaving?(state: PipelineState, options?: AbortOptions): Promise<void>
  /**
   * The session is closing: wait for `offPath` (the transport's deferred checks) as needed and
   * return the peers convicted meanwhile. Runs before the hops are closed.
   */
  settle?(offPath: () => Promise<unknown>): Promise<readonly Exclusion[]>
  /** After settle: free what the observer holds (runs beside the hops' close). */
  close?(): Promise<void>
}

/** The canary monitor as a pipeline observer: probes after steps, audits chained steps, late convictions. */
export class CanaryObserver implements PipelineObserver {
  constructor(
    private readonly canaries: CanaryMonitor,
    private readonly session: { readonly sessionId: string; readonly forwarding: 'relay' | 'chain'; readonly maxLength: number }
  ) {}

  async stepDone(state: PipelineState, step: CompletedStep, { signal }: AbortOptions = {}): Promise<readonly Exclusion[]> {
    const { forwarding, maxLength, sessionId } = this.session
    // the real step's shape too: decoys copy real sessions' prefill, length and max length
    const ctx = {
      forwarding,
      maxLength,
      signal,
      sessionId,
      startPosition: step.startPosition,
      rows: step.rows,
      draftLength: step.draftLength
    }
    return this.exclusions(await this.canaries.afterStep(state.route, ctx))
  }

  async chainedStepChecked(
    hops: readonly HopSession[],
    stepId: number,
    rows: number,
    receipts: readonly Receipt[]
  ): Promise<void> {
    await this.canaries.audits.audit('real', hops, stepId, rows, receipts)
  }

  async settle(offPath: () => Promise<unknown>): Promise<readonly Exclusion[]> {
    // the last steps' audits go out now rather than with a later round
    await this.canaries.audits.drain(offPath)
    // Canary steps run beside the real ones: a conviction landing after the last step still counts.
    return this.exclusions(await this.canaries.settle(this.session.sessionId))
  }

  private exclusions(peers: readonly string[]): Exclusion[] {
    return peers.map((peerId) => ({
      peerId,
      why: this.canaries.whyExcluded(peerId),
      posterior: this.canaries.detector.posterior(peerId)
    }))
  }
}
