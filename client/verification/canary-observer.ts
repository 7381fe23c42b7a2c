import type { AbortOptions } from '@libp2p/interface'
import type { Receipt } from '../../protocol/index.js'
import type { HopSession } from '../session/hop.js'
import type { CompletedStep, Exclusion, PipelineObserver, PipelineState } from '../session/pipeline-observer.js'
import type { CanaryMonitor } from './canary-monitor.js'

/** The canary monitor as a pipeline observer: probes after steps, audits chained steps, late convictions. */
export class CanaryObserver implements PipelineObserver {
  constructor(
    private readonly canaries: CanaryMonitor,
    private readonly session: { readonly sessionId: string; readonly forwarding: 'relay' | 'chain'; readonly maxLength: number }
  ) {}

  beforeStep(): Promise<void> {
    return this.canaries.beforeStep()
  }

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
