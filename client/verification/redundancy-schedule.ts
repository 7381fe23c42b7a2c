import type { AbortOptions } from '@libp2p/interface'
import {
  CanaryArgumentError,
  type CanarySet,
  type DecoyPlan,
  type DriftModel,
  inputFor,
  type PeerVerdict,
  referenceFor,
  type WireDType
} from '../../canary/index.js'
import type { Host, Receipt } from '../../protocol/index.js'
import { REDUNDANCY_STEPS } from '../options.js'
import type { HopTarget } from '../session/hop.js'
import { type CrossCheck, crossCheckSpan } from './redundancy.js'

/*
 * Redundancy checks on a schedule (issue 16): now and then, after a real relayed step, a hop whose
 * span [start, end) another peer serves too gets a decoy, and that peer gets the same one, each
 * in a session of its own (client/verification/redundancy.ts). Every answer is scored against the client's
 * reference like a canary's (so a tamperer is convicted by the same detector, with the same
 * guarantees); a disagreement beyond the benign spread is resolved by the reference, or by a third
 * peer of the span where there is none, and recorded.
 */

/** One scheduled check, as logged (`redundancy` event) and reported. */
export interface RedundancyRecord {
  readonly span: readonly [number, number]
  readonly peers: readonly [string, string]
  readonly third?: string
  readonly steps: number
  readonly agreed: boolean
  /** First position where the two answers disagreed. */
  readonly position?: number
  readonly liars?: readonly string[]
  readonly resolvedBy?: CrossCheck['resolvedBy']
}

/** What a check needs of the canary monitor. */
export interface RedundancyDeps {
  readonly host: Host
  readonly modelId: string
  readonly benign: DriftModel
  /** Peers serving exactly [start, end) that routes may use (not banned). */
  peersOf(start: number, end: number): readonly HopTarget[]
  isExcluded(peerId: string): boolean
  setFor(boundary: number): CanarySet
  /** A decoy plan at a boundary over a canary none of `peers` has been sent. */
  plan(boundary: number, peers: readonly string[]): DecoyPlan
  wireOf(target: HopTarget): WireDType
  pick(n: number): number
  /** Score one answer like a canary's (the detector, the evidence). */
  score(
    target: HopTarget,
    decoy: { sessionId: string; canary: number },
    stepId: number,
    position: number,
    rows: number,
    output: Float32Array,
    reference: Float32Array,
    receipt?: Receipt
  ): PeerVerdict
}

/** The hop's span partners that accept its wire dtype and are not excluded. */
export function spanPartners(hop: HopTarget, wire: WireDType, deps: RedundancyDeps): HopTarget[] {
  return deps
    .peersOf(hop.start, hop.end)
    .filter(
      (p) =>
        p.peerId !== hop.peerId &&
        p.start === hop.start &&
        p.end === hop.end &&
        !deps.isExcluded(p.peerId) &&
        (p.wireDtypes === undefined || p.wireDtypes.includes(wire))
    )
}

/**
 * One scheduled check: the first REDUNDANCY_STEPS steps of a decoy plan (a real session's shape)
 * to the hop and to a partner of its span. Undefined when the span has no partner.
 */
export async function scheduledCrossCheck(
  hop: HopTarget,
  deps: RedundancyDeps,
  options: AbortOptions = {}
): Promise<{ record: RedundancyRecord; verdicts: PeerVerdict[] } | undefined> {
  const wire = deps.wireOf(hop)
  const partners = spanPartners(hop, wire, deps)
  if (partners.length === 0) return undefined
  const other = partners[deps.pick(partners.length)]
  const third = partners.find((p) => p.peerId !== other.peerId)
  const set = deps.setFor(hop.start)
  const plan = deps.plan(hop.start, [hop.peerId, other.peerId])
  const steps = plan.steps.slice(0, REDUNDANCY_STEPS)
  const last = steps[steps.length - 1]
  const positions = last.startPosition + last.rows
  const reference = referenceFor(set, plan.canaryIndex, hop.end, 0, positions)
  const verdicts: PeerVerdict[] = []
  const result = await crossCheckSpan(
    [hop, other],
    {
      host: deps.host,
      modelId: deps.modelId,
      dim: set.dim,
      inputs: inputFor(set, plan.canaryIndex, 0, positions),
      steps,
      maxLength: plan.maxLength,
      benign: deps.benign,
      wire,
      reference,
      third,
      onAnswer: (peer, sessionId, stepId, { startPosition, rows }, out) => {
        const ref = reference.subarray(startPosition * set.dim, (startPosition + rows) * set.dim)
        const decoy = { sessionId, canary: plan.canaryIndex }
        verdicts.push(deps.score(peer, decoy, stepId, startPosition, rows, out.hidden, ref, out.receipts[0]))
      }
    },
    options
  )
  const record: RedundancyRecord = {
    span: [hop.start, hop.end],
    peers: [hop.peerId, other.peerId],
    ...(third ? { third: third.peerId } : {}),
    steps: steps.length,
    agreed: result.agreed,
    ...(result.agreed ? {} : { position: result.position, liars: result.liars, resolvedBy: result.resolvedBy })
  }
  return { record, verdicts }
}

/**
 * The schedule: after a real relayed step, each hop gets a check with probability `rate`
 * (ClientInit canaries.redundancyRate; 0: off), at most one in flight per span (the caller's
 * launch keys on the span). Records every check and logs it as a `redundancy` event.
 */
export class RedundancySchedule {
  readonly records: RedundancyRecord[] = []
  readonly rate: number

  constructor(
    private readonly deps: RedundancyDeps | undefined,
    rate: number,
    private readonly counts: { canarySteps: number },
    private readonly log?: (e: Record<string, unknown>) => void
  ) {
    if (!(rate >= 0 && rate <= 1)) throw new CanaryArgumentError(`redundancyRate must be in [0, 1], got ${rate}`)
    this.rate = rate
  }

  /** Whether a hop gets a check after this step (`draw` uniform in [0, 1)). */
  wants(draw: () => number): boolean {
    return this.deps !== undefined && draw() < this.rate
  }

  /**
   * A redundancy check of a hop (relayed): the same decoy to it and to another peer of its span,
   * each answer scored as a canary's; recorded and logged. None without a partner.
   */
  async check(hop: HopTarget, options: AbortOptions = {}): Promise<PeerVerdict[]> {
    if (!this.deps) return []
    const got = await scheduledCrossCheck(hop, this.deps, options)
    if (!got) return []
    this.counts.canarySteps += 2 * got.record.steps
    this.records.push(got.record)
    this.log?.({ event: 'redundancy', ...got.record })
    return got.verdicts
  }
}
