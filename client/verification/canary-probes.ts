import {
  type CanarySet,
  type DriftModel,
  densityRatio,
  driftMetrics,
  type PeerVerdict,
  referenceFor
} from '../../canary/index.js'
import type { DType, Host } from '../../protocol/index.js'
import { errorCode } from '../../shards/index.js'
import { HopSession, type HopTarget } from '../session/hop.js'
import type { AuditBatcher } from './audit-batch.js'
import type { DecoyPool } from './canary-decoy-pool.js'
import { decoyDone } from './canary-decoys.js'
import type { Scoring } from './canary-scores.js'
import type { StepContext } from './canary-types.js'
import { ChainedDecoy } from './chained-decoy.js'
import type { ReceiptLedger } from './receipts.js'
import type { SpanReplay } from './span-replay.js'

/*
 * The canary steps themselves (docs/design.md §5, docs/verification.md): one step of a decoy session sent to a hop (relayed)
 * or chained over a whole route, and its answers scored. The canary monitor decides when
 * (client/verification/canary-monitor.ts); these send and score.
 */

/** What a probe needs of the canary monitor. */
export interface ProbeDeps extends Scoring {
  readonly host: Host
  readonly modelId: string
  readonly benign: DriftModel
  readonly pool: DecoyPool
  readonly audits: AuditBatcher
  readonly receipts: ReceiptLedger
  readonly counts: { canarySteps: number; canaryComputeMs: number }
  /** Chained decoys' scoring, per decoy in step order, waiting for their audit rounds. */
  readonly scoring: Map<string, Promise<void>>
  /** The client's own run of a hop's span on what the hop was fed (relayed decoys' later hops). */
  readonly replay?: SpanReplay
  setFor(boundary: number): CanarySet
  wireOf(target: HopTarget): DType
  classOf(target: HopTarget): string
  log?: (e: Record<string, unknown>) => void
}

/** The decoy of one lane: lane 0 is the decoy a peer always has, lanes 1+ only below the threshold. */
export function laneKey(key: string, lane: number): string {
  return lane === 0 ? key : `${key}#${lane}`
}

/**
 * Once a peer needs fewer decoys in flight (`lanes`), the extra ones' sessions end, after their
 * step in flight (`inflight`, keyed by lane).
 */
export function retireLanes(
  d: ProbeDeps,
  inflight: ReadonlyMap<string, unknown>,
  key: string,
  lanes: number,
  inFlight: number
): void {
  for (let lane = Math.max(1, lanes); lane < inFlight; lane++) {
    const k = laneKey(key, lane)
    if (inflight.has(k) || !d.pool.has(k)) continue
    // as at a decoy's planned end: its last steps' audits go out in a round before it closes,
    // so every step of a decoy is audited, as every real step is
    d.audits.round()
    d.pool.release(k, d.scoring.get(k) ?? Promise.resolve())
  }
}

/** Send one canary step to a hop (relayed) and score its answer. */
export async function probeHop(d: ProbeDeps, target: HopTarget, ctx: StepContext, lane = 0): Promise<PeerVerdict[]> {
  const key = laneKey(`${target.peerId}/${target.start}/${target.end}`, lane)
  const decoy = await d.pool.decoyFor(key, [target], ctx, async (sessionId, maxLength) => ({
    hop: await HopSession.open(
      d.host,
      target,
      d.setFor(target.start).dim,
      { sessionId, modelId: d.modelId, maxLength, wireDtype: d.wireOf(target) },
      { signal: ctx.signal }
    )
  }))
  const set = d.setFor(target.start)
  return await d.pool.stepDecoy(
    key,
    decoy,
    async (step, stepId) => {
      // a speculative decoy's rows after its first rejected draft are not the canary's: not scored
      const { startPosition: position, scored: rows } = step
      const input = d.pool.draftRows!.input(set, decoy.canary, target.start, decoy.spec, step)
      const out = await decoy.hop!.sendStep(stepId, position, input, { signal: ctx.signal })
      await d.receipts.check([target], { sessionId: decoy.sessionId, stepId, position }, out.receipts, out.sent, out.received)
      d.counts.canarySteps++
      d.counts.canaryComputeMs += out.timings[0]?.computeMs ?? 0
      const reference = referenceFor(set, decoy.canary, target.end, position, rows)
      const output = out.hidden.subarray(0, rows * set.dim)
      return [d.score(target, decoy, stepId, position, rows, output, reference, out.receipts[0])]
    },
    ctx.draftLength
  )
}

/**
 * One step of a decoy chained over the whole route. Each hop's output is scored against the
 * reference at its span end; once a hop's answer looks like tampering (density ratio above 1),
 * the hops after it got an altered input, so they are not scored for the rest of this decoy.
 */
export async function probeChain(
  d: ProbeDeps,
  route: readonly HopTarget[],
  ctx: StepContext,
  lane = 0,
  gate: () => Promise<void> = () => Promise.resolve()
): Promise<PeerVerdict[]> {
  const key = laneKey(route.map((h) => `${h.peerId}/${h.start}/${h.end}`).join('>'), lane)
  const decoy = await d.pool.decoyFor(key, route, ctx, async (sessionId, maxLength) => ({
    chain: await ChainedDecoy.open(
      d.host,
      route,
      d.setFor(route[0].start).dim,
      { sessionId, modelId: d.modelId, maxLength, wireDtype: d.wireOf(route[0]) },
      { signal: ctx.signal }
    ),
    // a hop after the first is fed its upstream's actual output: scored against its span replayed on it
    replays: route.map((t, i) => (i > 0 && d.replay ? d.replay.open(t, maxLength) : undefined))
  }))
  // once open, stepped beside the next real step (client/verification/canary-schedule.ts)
  await gate()
  // its peer was convicted meanwhile (DecoyPool.releasePeer): the decoy ended, no step goes
  if (!d.pool.has(key)) return []
  const set = d.setFor(route[0].start)
  const { out, position, rows, stepId } = await d.pool.stepDecoy(
    key,
    decoy,
    async (step, stepId) => {
      const input = d.pool.draftRows!.input(set, decoy.canary, route[0].start, decoy.spec, step)
      const audit = d.audits.audit.bind(d.audits, 'decoy')
      const got = await decoy.chain!.sendChainedStep(stepId, step.startPosition, input, set.dim, d.receipts, audit, {
        signal: ctx.signal
      })
      // only the canary's own rows are scored (a speculative decoy's rejected drafts are not)
      return { out: got, position: step.startPosition, rows: step.scored, stepId }
    },
    ctx.draftLength
  )
  d.counts.canarySteps += route.length
  d.counts.canaryComputeMs += out.computeMs
  // Scored once the middle hops' outputs come with their audit round, in the decoy's step order
  // (a hop found tampering taints the inputs of the hops after it for the rest of the decoy).
  const scored = (d.scoring.get(key) ?? Promise.resolve())
    .then(async () => {
      const full = [...(await out.middle), out.last]
      const outputs = full.map((o) => o.subarray(0, rows * set.dim))
      for (let i = 0; i < Math.min(route.length, decoy.taintedFrom + 1); i++) {
        // hop i > 0 got hop i - 1's output (the receipts chain the hashes): scored against its own
        // span run on that (client/verification/span-replay.ts), not against the canary's reference
        const replay = decoy.replays?.[i]
        const reference = replay
          ? replay.run(full[i - 1], position).subarray(0, rows * set.dim)
          : referenceFor(set, decoy.canary, route[i].end, position, rows)
        const inputs = replay?.inputs().subarray(0, (position + rows) * set.dim)
        // evidence names the hop's own session id, which its receipt is signed for (issue #39)
        const scoredAs = { sessionId: decoy.chain!.hops[i].sessionId, canary: decoy.canary }
        const _v = d.score(route[i], scoredAs, stepId, position, rows, outputs[i], reference, out.receipts[i], inputs)
        if (
          decoy.taintedFrom === route.length &&
          densityRatio(d.benign, driftMetrics(outputs[i], reference), d.classOf(route[i]), position + rows) > 1
        )
          decoy.taintedFrom = i
      }
    })
    .catch((err: Error) => d.log?.({ event: 'canary-error', key, code: errorCode(err), message: err.message }))
  d.scoring.set(key, scored)
  scored.finally(() => {
    if (d.scoring.get(key) === scored) d.scoring.delete(key)
  })
  if (decoyDone(decoy)) {
    // The decoy's session ends here: as a real one's end does (RemotePipeline.close), its last
    // audits go out now, in a round for every session, and the session closes after them.
    d.audits.round()
    d.pool.retire(key, decoy, scored)
  }
  return []
}
