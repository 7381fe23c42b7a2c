import { densityRatio, driftMetrics, type PeerVerdict, referenceFor } from '../../canary/index.js'
import { HopSession, type HopTarget } from '../session/hop.js'
import { randomSessionId } from '../session/session-id.js'
import type { Decoy } from './canary-decoys.js'
import type { ProbeDeps } from './canary-probes.js'
import type { StepContext } from './canary-types.js'

/*
 * A relayed decoy that spans the route as a real relayed session does (issue #39, item 3). A real
 * session is opened on every hop of its route, each hop under an id of its own (route-hops.ts),
 * and each step goes hop by hop, the client handing each hop's output to the next. A decoy opened
 * on one hop alone, under its own id, stood out to two colluding hops: the real session was the
 * one both of them saw (by id then, by the hop pattern once ids are per hop). So a relayed decoy
 * is opened on every hop of the route, each hop its own id, and each of its steps goes through
 * the hops in route order, each hop fed the previous hop's actual output (a hop that compared
 * its input with its upstream colluder's output would tell a decoy fed the client's reference
 * apart). The first hop is fed the canary's exact input and scored against the canary's
 * reference at its span end; each later hop is scored against the client's own computation of its
 * span on the rows it was actually fed (client/verification/span-replay.ts): scored against the canary's
 * reference, it carried its upstream's benign drift (an honest f16-KV hop behind a q8_0-KV hop
 * was convicted so). Once a hop's answer looks like tampering, the hops after it are not scored
 * for the rest of this decoy (an input made to mislead is no fair test of them).
 */

/** Open a relayed decoy on every hop of `route`: hop 0 under `sessionId`, each other hop an id of its own. */
export async function openRelayDecoy(
  d: ProbeDeps,
  route: readonly HopTarget[],
  sessionId: string,
  maxLength: number,
  ctx: StepContext
): Promise<Pick<Decoy, 'hops' | 'replays'>> {
  const dim = d.setFor(route[0].start).dim
  const hops: HopSession[] = []
  try {
    for (const [i, t] of route.entries()) {
      const id = i === 0 ? sessionId : randomSessionId()
      const init = { sessionId: id, modelId: d.modelId, maxLength, wireDtype: d.wireOf(t) }
      hops.push(await HopSession.open(d.host, t, dim, init, { signal: ctx.signal }))
    }
  } catch (err) {
    for (const h of hops) h.close().catch(() => {})
    throw err
  }
  // the hops after the first are scored against their span replayed on what they were fed
  const replays = route.map((t, i) => (i > 0 && d.replay ? d.replay.open(t, maxLength) : undefined))
  return { hops, replays }
}

/** The key of a route's relayed decoy (one lane). */
export function relayRouteKey(route: readonly HopTarget[]): string {
  return `relay:${route.map((h) => `${h.peerId}/${h.start}/${h.end}`).join('>')}`
}

/**
 * One step of a relayed decoy over the whole route, after `gate` opens (the canary monitor's
 * schedule: canary-schedule.ts). Returns the verdicts of the hops scored.
 */
export async function probeRelayRoute(
  d: ProbeDeps,
  route: readonly HopTarget[],
  ctx: StepContext,
  key: string,
  gate: () => Promise<void> = () => Promise.resolve()
): Promise<PeerVerdict[]> {
  const decoy = await d.pool.decoyFor(key, route, ctx, (sessionId, maxLength) =>
    openRelayDecoy(d, route, sessionId, maxLength, ctx)
  )
  await gate()
  // its peer was convicted meanwhile (DecoyPool.releasePeer): the decoy ended, no step goes
  if (!d.pool.has(key)) return []
  const set = d.setFor(route[0].start)
  const hops = decoy.hops!
  return await d.pool.stepDecoy(
    key,
    decoy,
    async (step, stepId) => {
      const { startPosition: position, scored: rows } = step
      let input = d.pool.draftRows!.input(set, decoy.canary, route[0].start, decoy.spec, step)
      const verdicts: PeerVerdict[] = []
      for (const [i, target] of route.entries()) {
        // A thin client (canary bank) cannot replay a span: each hop gets the canary's own input
        // at its start, as one-hop decoys did, and colluders comparing input with upstream
        // output can tell (docs/verification.md); a correct verdict comes first.
        if (i > 0 && !decoy.replays?.[i])
          input = d.pool.draftRows!.input(d.setFor(target.start), decoy.canary, target.start, decoy.spec, step)
        const out = await hops[i].sendStep(stepId, position, input, { signal: ctx.signal })
        await d.receipts.check([target], { sessionId: hops[i].sessionId, stepId, position }, out.receipts, out.sent, out.received)
        d.counts.canarySteps++
        d.counts.canaryComputeMs += out.timings[0]?.computeMs ?? 0
        const fed = input
        input = out.hidden
        // the replay follows every row fed, scored or not, as the hop's KV does
        const replay = decoy.replays?.[i]
        const replayed = replay?.run(fed, position)
        if (i >= decoy.taintedFrom) continue
        const reference = replayed
          ? replayed.subarray(0, rows * set.dim)
          : referenceFor(set, decoy.canary, target.end, position, rows)
        const output = out.hidden.subarray(0, rows * set.dim)
        const scoredAs = { sessionId: hops[i].sessionId, canary: decoy.canary }
        const inputs = replay?.inputs().subarray(0, (position + rows) * set.dim)
        verdicts.push(d.score(target, scoredAs, stepId, position, rows, output, reference, out.receipts[0], inputs))
        const drift = driftMetrics(output, reference)
        if (densityRatio(d.benign, drift, d.classOf(target), position + rows) > 1) decoy.taintedFrom = i + 1
      }
      return verdicts
    },
    ctx.draftLength
  )
}
