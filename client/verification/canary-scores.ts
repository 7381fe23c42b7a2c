import {
  benignClassKey,
  type CanarySet,
  type Detector,
  type Drift,
  driftMetrics,
  inputFor,
  type PeerVerdict
} from '../../canary/index.js'
import type { DType, Receipt } from '../../protocol/index.js'
import type { HopTarget } from '../session/hop.js'
import type { Decoy } from './canary-decoys.js'
import type { CanaryEvidence, CanaryPeerReport } from './canary-types.js'
import type { ReplayIndex } from './replay-index.js'

/*
 * Where a canary check ends (docs/design.md §1.3, the canary walk): the drift of a hop's answer
 * against the client's own output goes to the sequential test (canary/detector.ts), a verdict
 * that convicts keeps its evidence, and the conviction waits here until the monitor takes it at
 * the next real step. The probes (canary-probes.ts) send; this file scores.
 */

/** How a hop's answer is scored: what the probes, cross-checks and own-step replays call (PeerScores behind it). */
export interface Scoring {
  score(
    target: HopTarget,
    decoy: Pick<Decoy, 'sessionId' | 'canary'>,
    stepId: number,
    position: number,
    rows: number,
    output: Float32Array,
    reference: Float32Array,
    receipt?: Receipt,
    inputs?: Float32Array
  ): PeerVerdict
  noteConviction(v: PeerVerdict): void
}

/**
 * A hop's wire and benign drift class (canary/drift-model.ts: its wire, the model's weights, its
 * announced KV dtype and backend), as the probes and the scores read them.
 */
export class HopClasses {
  constructor(
    private readonly quantized: boolean,
    private readonly defaultWire: DType
  ) {}

  /** The wire dtype a hop was negotiated (a decoy uses it, as the real session does). */
  readonly wireOf = (target: HopTarget): DType => (target as HopTarget & { wireDtype?: DType }).wireDtype ?? this.defaultWire

  readonly classOf = (target: HopTarget): string =>
    benignClassKey(this.wireOf(target), target.kvDtype, this.quantized, target.backend)
}

/** Canary answers scored per peer: the detector's observations, counts, and each conviction's evidence. */
export class PeerScores implements Scoring {
  readonly evidence: CanaryEvidence[] = []
  private readonly sent = new Map<string, number>()
  private readonly last = new Map<string, Drift>()
  /** Peers convicted since the monitor last took them (CanaryMonitor.afterStep, settle). */
  private readonly convicted: string[] = []

  constructor(
    private readonly detector: Detector,
    private readonly modelId: string,
    private readonly hops: {
      classOf(t: HopTarget): string
      wireOf(t: HopTarget): DType
      setFor(boundary: number): CanarySet
    },
    /** Every receipt's index (replay-index.ts): a peer convicted there is out as well. */
    private readonly replays?: ReplayIndex
  ) {}

  /** A peer convicted (by drift or by replayed receipts): no new decoy step opens on it. */
  readonly isOut = (peerId: string): boolean =>
    this.detector.verdict(peerId).excluded || (this.replays?.isConvicted(peerId) ?? false)

  score(
    target: HopTarget,
    decoy: Pick<Decoy, 'sessionId' | 'canary'>,
    stepId: number,
    position: number,
    rows: number,
    output: Float32Array,
    reference: Float32Array,
    receipt?: Receipt,
    /** The rows the hop was fed, when not the canary's own (a relayed decoy's later hop). */
    inputs?: Float32Array
  ): PeerVerdict {
    const drift = driftMetrics(output, reference)
    // canary -1: a real step the client replayed (own-step-replay.ts), not a canary sent
    if (decoy.canary >= 0) this.sent.set(target.peerId, (this.sent.get(target.peerId) ?? 0) + 1)
    this.last.set(target.peerId, drift)
    const before = this.detector.verdict(target.peerId).excluded
    // Scored against benign drift at the step's own position (benign drift grows with KV length).
    // In the class of the hop's wire and announced KV dtype (a q8_0 cache drifts more, benignly).
    const verdict = this.detector.observe(target.peerId, drift, this.hops.classOf(target), position + rows)
    this.noteConviction(verdict)
    if (verdict.excluded && !before) {
      this.evidence.push({
        peerId: target.peerId,
        span: [target.start, target.end],
        sessionId: decoy.sessionId,
        stepId,
        position,
        rows,
        drift,
        posterior: verdict.posterior,
        receipt,
        modelId: this.modelId,
        wire: this.hops.wireOf(target),
        ...(target.kvDtype ? { kvDtype: target.kvDtype } : {}),
        // copies: what a third party needs to recompute the step (client/verification/evidence.ts)
        input: (inputs ?? inputFor(this.hops.setFor(target.start), decoy.canary, 0, position + rows)).slice(),
        output: output.slice()
      })
    }
    return verdict
  }

  /** A verdict that has just convicted its peer (on this very observation) is reported once. */
  readonly noteConviction = (v: PeerVerdict): void => {
    if (v.excluded && v.excludedAfter === v.observations && !this.convicted.includes(v.peerId)) this.convicted.push(v.peerId)
  }

  /** The peers convicted by canary drift since the last call. */
  takeConvicted(): string[] {
    return this.convicted.splice(0)
  }

  report(): CanaryPeerReport[] {
    return this.detector
      .report()
      .map((v) => ({ ...v, canariesSent: this.sent.get(v.peerId) ?? 0, lastDrift: this.last.get(v.peerId) }))
  }
}
