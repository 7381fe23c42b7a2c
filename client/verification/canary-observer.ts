import type { AbortOptions } from '@libp2p/interface'
import type {
  ChainedStep,
  CompletedStep,
  Exclusion,
  PipelineObserver,
  PipelineState,
  RelayedStep
} from '../session/pipeline-observer.js'
import type { CanaryMonitor } from './canary-monitor.js'
import type { OwnStepSession } from './own-step-replay.js'

/** The canary monitor as a pipeline observer: probes after steps, audits chained steps, late convictions. */
export class CanaryObserver implements PipelineObserver {
  /** This session's relayed steps, kept to replay at its end while no canary exists (own-step-replay.ts, issue 31). */
  private own?: OwnStepSession
  private ownDecided = false
  /** The step just done was recorded in `own`. */
  private recorded = false

  constructor(
    private readonly canaries: CanaryMonitor,
    private readonly session: { readonly sessionId: string; readonly forwarding: 'relay' | 'chain'; readonly maxLength: number }
  ) {}

  beforeStep(): Promise<void> {
    return this.canaries.beforeStep(this.session.sessionId)
  }

  /** The session's record of its own steps: decided at its first step, replayed whole or not at all. */
  private ownSession(): OwnStepSession | undefined {
    if (!this.ownDecided) this.own = this.canaries.ownSteps.begin()
    this.ownDecided = true
    return this.own
  }

  relayedStepChecked(step: RelayedStep): void {
    const own = this.ownSession()
    own?.record(step)
    this.recorded = own !== undefined
  }

  async stepDone(state: PipelineState, step: CompletedStep, { signal }: AbortOptions = {}): Promise<readonly Exclusion[]> {
    const own = this.ownSession()
    // A chained step's record comes later, with its middle hops' audits (chainedStepChecked):
    // expected now, so one that never comes leaves its route's peers unverified.
    if (this.session.forwarding === 'chain' && state.hops.length > 1 && own) own.expect(state.hops)
    // a real step not replayed: its peers' text needs canaries (verified-clear.ts)
    else if (!this.recorded) this.canaries.ownSteps.unverify(state.route.map((h) => h.peerId))
    this.recorded = false
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

  async chainedStepChecked(step: ChainedStep): Promise<void> {
    const middles = await this.canaries.audits.audit('real', step.hops, step.stepId, step.rows, step.receipts)
    // each middle hop's audited output is what it signed and forwarded: with the client's input
    // and the last hop's answer, every hop's input and output of the step (own-step-replay.ts)
    this.own?.recordChained(step, middles)
  }

  async settle(offPath: () => Promise<unknown>): Promise<readonly Exclusion[]> {
    // the last steps' audits go out now rather than with a later round
    await this.canaries.audits.drain(offPath)
    // the session's own steps replayed and scored, before the convictions are taken
    const own = this.own
    this.own = undefined
    if (own) await this.canaries.ownSteps.check(own)
    // Canary steps run beside the real ones: a conviction landing after the last step still counts.
    return this.exclusions(await this.canaries.settle(this.session.sessionId))
  }

  private exclusions(peers: readonly string[]): Exclusion[] {
    return peers.map((peerId) => ({
      peerId,
      // why, for the log: a replayed receipt (replay-index.ts) or the drift test (canary-scores.ts)
      why: this.canaries.replays.isConvicted(peerId) ? 'replayed output' : 'canary drift',
      posterior: this.canaries.detector.posterior(peerId)
    }))
  }
}
