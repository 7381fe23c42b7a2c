import type { CanaryMonitor, StepContext } from '../verification/canary-monitor.js'
import type { HopTarget } from './hop.js'

/** Canary rounds verifiedStream spends at a session's end on peers not yet cleared, at most. */
export const MAX_CLEARING_ROUNDS = 64
/** Failed canary rounds (busy, timed out) before the peers left count as unverifiable. */
const MAX_CLEARING_FAILURES = 4
const CLEARING_RETRY_MS = 250

/**
 * The evidence threshold of verifiedStream: a peer has answered its start-up burst of canaries
 * (canary/adaptive-rate.ts; at least one at a fixed rate) and is not a suspect nor convicted.
 * A tamperer at rate q hides through a burst of N with probability (1 − q)^N (0.19 for q = 0.1,
 * N = 16): the threshold bounds how much of what a client sees came from unchecked peers, and a
 * later conviction still rolls shown tokens back.
 */
export function isCleared(canaries: CanaryMonitor, peerId: string): boolean {
  const v = canaries.detector.verdict(peerId)
  return (
    !v.excluded && v.posterior < canaries.rates.suspectPosterior && v.observations >= Math.max(1, canaries.rates.startCanaries)
  )
}

/**
 * At the end of a verifiedStream session: tokens still held wait on peers that have not answered
 * enough canaries yet (a short generation ends before the burst does). Probe them (relayed: each
 * such hop; chained: the whole route) until each clears or is convicted, for a bounded number of
 * rounds; what is left is released anyway, with the conviction check done.
 */
export async function clearPeers(
  canaries: CanaryMonitor,
  routes: readonly HopTarget[][],
  peers: readonly string[],
  isConvicted: (peerId: string) => boolean,
  ctx: StepContext,
  o: { readonly wait?: boolean } = {}
): Promise<string[]> {
  // Peers whose every real step the client replayed and found benign while no canary existed
  // (client/verification/own-step-replay.ts, issue 31): their text is verified as it is; their
  // canaries come in later generations. Returned as not yet checked by canaries, not blamed.
  const own = peers.filter((p) => !isConvicted(p) && canaries.ownSteps.verified(p))
  const rest = peers.filter((p) => !own.includes(p))
  if (rest.length === 0) return own
  return [...own, ...(await clearByCanaries(canaries, routes, rest, isConvicted, ctx, o))]
}

/** clearPeers' canary rounds for the peers not verified by replay. */
async function clearByCanaries(
  canaries: CanaryMonitor,
  routes: readonly HopTarget[][],
  peers: readonly string[],
  isConvicted: (peerId: string) => boolean,
  ctx: StepContext,
  o: { readonly wait?: boolean }
): Promise<string[]> {
  let failures = 0
  // A slow model's first set still building (issue 31): held tokens (verifiedStream, `wait`) wait
  // for it; an ended generation does not, and its peers stay unchecked, not unverifiable: their
  // canaries come in the next generations (canaries.settle does not wait for the build either).
  if (canaries.canariesPending && !o.wait) return [...peers]
  await canaries.canariesReady()
  for (let round = 0; round < MAX_CLEARING_ROUNDS; round++) {
    const left = new Set(peers.filter((p) => !isCleared(canaries, p) && !isConvicted(p)))
    if (left.size === 0) return []
    const route = [...routes].reverse().find((r) => r.some((h) => left.has(h.peerId)))
    if (!route) return []
    try {
      // as many decoys in flight as below the threshold in a session (canary/adaptive-rate.ts)
      const lanes = (n: number) => Array.from({ length: Math.max(1, n) }, (_, lane) => lane)
      const probes =
        ctx.forwarding === 'chain' && route.length > 1
          ? lanes(Math.max(...route.map((h) => canaries.lanesOf(h.peerId)))).map((lane) =>
              canaries.probeChained(route, ctx, lane)
            )
          : route
              .filter((h) => left.has(h.peerId))
              .flatMap((h) => lanes(canaries.lanesOf(h.peerId)).map((lane) => canaries.probe(h, ctx, lane)))
      // every probe ends before a retry (a retry steps the same decoys)
      const failed = (await Promise.allSettled(probes)).find((r) => r.status === 'rejected')
      if (failed) throw failed.reason
      await canaries.settle()
    } catch {
      // busy or slow: a few more tries, then the peer counts as unverifiable (the caller routes around it)
      if (++failures >= MAX_CLEARING_FAILURES) return []
      await new Promise((resolve) => setTimeout(resolve, CLEARING_RETRY_MS))
    }
  }
  return []
}
