import type { AbortOptions } from '@libp2p/interface'
import { type DecoyStep, type DriftModel, densityRatio, driftMetrics, type WireDType } from '../../canary/index.js'
import type { DType, Host } from '../../protocol/index.js'
import { HopSession, type HopStepOutcome, type HopTarget } from '../session/hop.js'
import { randomSessionId } from '../session/session-id.js'

/*
 * Redundancy (issue 16): the same decoy to two peers serving one span. Two honest peers agree
 * within the benign spread (different kernels, the wire dtype); an answer pair further apart
 * than that (density ratio of their drift > 1 under the benign drift model, as a canary is
 * scored) means at least one of them tampers. Which one is settled by the reference (a canary
 * bank's, or the client's own trace) or, without one, by a third peer of the span: the answers
 * that agree with the majority are honest.
 */

export interface PeerAnswer {
  readonly peerId: string
  readonly output: Float32Array
}

export interface CompareContext {
  readonly benign: DriftModel
  readonly wire: WireDType
  /** KV length after the step (its position + rows): the benign spread grows with it. */
  readonly kvLength: number
}

/** Whether two answers to one step are further apart than two honest peers' would be. */
export function answersDisagree(a: Float32Array, b: Float32Array, c: CompareContext): boolean {
  if (a.length !== b.length || a.length === 0) throw new RangeError('answers to one step have one shape')
  return densityRatio(c.benign, driftMetrics(a, b), c.wire, c.kvLength) > 1
}

export interface Resolution {
  /** Peers whose answer is tampered; empty when undecided. */
  readonly liars: string[]
  readonly honest: string[]
  readonly resolvedBy: 'reference' | 'majority' | 'undecided'
}

/**
 * Who is lying among answers to one step: with a reference, every answer beyond the benign
 * spread of it; without, with three or more answers, those that disagree with more than half of
 * the others; otherwise undecided.
 */
export function resolveDisagreement(answers: readonly PeerAnswer[], c: CompareContext, reference?: Float32Array): Resolution {
  if (answers.length < 2) throw new RangeError('a disagreement needs two answers')
  if (reference) {
    const liars = answers.filter((a) => answersDisagree(a.output, reference, c)).map((a) => a.peerId)
    return { liars, honest: answers.map((a) => a.peerId).filter((p) => !liars.includes(p)), resolvedBy: 'reference' }
  }
  if (answers.length < 3) return { liars: [], honest: [], resolvedBy: 'undecided' }
  const against = answers.map((a, i) => answers.filter((b, j) => j !== i && answersDisagree(a.output, b.output, c)).length)
  const liars = answers.filter((_, i) => against[i] > (answers.length - 1) / 2).map((a) => a.peerId)
  if (liars.length === 0 || liars.length === answers.length) return { liars: [], honest: [], resolvedBy: 'undecided' }
  return { liars, honest: answers.map((a) => a.peerId).filter((p) => !liars.includes(p)), resolvedBy: 'majority' }
}

export interface CrossCheckInit extends Omit<CompareContext, 'kvLength'> {
  readonly host: Host
  readonly modelId: string
  readonly dim: number
  /** The decoy's inputs at the span start, every position of its plan [positions, dim]. */
  readonly inputs: Float32Array
  /** The decoy's plan (a prefill, then one row a step). */
  readonly steps: readonly DecoyStep[]
  readonly maxLength: number
  /** Reference outputs at the span end (a bank's), [positions, dim]; without it a third peer decides. */
  readonly reference?: Float32Array
  /** A third peer of the span, asked only when the two disagree and there is no reference. */
  readonly third?: HopTarget
  /**
   * Each answer of the pair as it comes (the canary monitor scores each like a canary's):
   * the peer, its decoy session, the step's id and first position and rows, what it returned.
   */
  readonly onAnswer?: (peer: HopTarget, sessionId: string, stepId: number, step: DecoyStep, out: HopStepOutcome) => void
}

export interface CrossCheck extends Partial<Resolution> {
  /** Whether the two peers agreed on every step of the decoy. */
  readonly agreed: boolean
  /** The step (its first position) at which they first disagreed. */
  readonly position?: number
}

/** Run the same decoy on two peers of one span (each its own session), and settle a disagreement. */
export async function crossCheckSpan(
  pair: readonly [HopTarget, HopTarget],
  o: CrossCheckInit,
  options: AbortOptions = {}
): Promise<CrossCheck> {
  const [a, b] = pair
  if (a.start !== b.start || a.end !== b.end || (o.third && (o.third.start !== a.start || o.third.end !== a.end))) {
    throw new RangeError('a cross-check compares peers of one span')
  }
  // each a session of its own, its id shaped as every real hop session's (client/session/session-id.ts)
  const open = (t: HopTarget): Promise<HopSession> =>
    HopSession.open(
      o.host,
      t,
      o.dim,
      { sessionId: randomSessionId(), modelId: o.modelId, maxLength: o.maxLength, wireDtype: o.wire as DType },
      options
    )
  const sessions = await Promise.all([open(a), open(b)])
  let third: HopSession | undefined
  try {
    for (const [k, { startPosition, rows }] of o.steps.entries()) {
      const input = o.inputs.subarray(startPosition * o.dim, (startPosition + rows) * o.dim)
      const [x, y] = await Promise.all(sessions.map((s) => s.sendStep(k + 1, startPosition, input, options)))
      o.onAnswer?.(a, sessions[0].sessionId, k + 1, o.steps[k], x)
      o.onAnswer?.(b, sessions[1].sessionId, k + 1, o.steps[k], y)
      const c = { benign: o.benign, wire: o.wire, kvLength: startPosition + rows }
      if (!answersDisagree(x.hidden, y.hidden, c)) continue
      const answers: PeerAnswer[] = [
        { peerId: a.peerId, output: x.hidden },
        { peerId: b.peerId, output: y.hidden }
      ]
      const reference = o.reference?.subarray(startPosition * o.dim, (startPosition + rows) * o.dim)
      if (!reference && o.third) {
        // the third peer runs the decoy up to here (its KV must hold the same prefix)
        third = await open(o.third)
        let z: Float32Array | undefined
        for (const [j, s] of o.steps.slice(0, k + 1).entries()) {
          const rowsIn = o.inputs.subarray(s.startPosition * o.dim, (s.startPosition + s.rows) * o.dim)
          z = (await third.sendStep(j + 1, s.startPosition, rowsIn, options)).hidden
        }
        answers.push({ peerId: o.third.peerId, output: z! })
      }
      return { agreed: false, position: startPosition, ...resolveDisagreement(answers, c, reference) }
    }
    return { agreed: true }
  } finally {
    await Promise.all([...sessions, ...(third ? [third] : [])].map((s) => s.close().catch(() => {})))
  }
}
