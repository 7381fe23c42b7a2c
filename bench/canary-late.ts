/**
 * Late tampering under the adaptive canary rate: decoys must run as long as real sessions, or a
 * peer that tampers only after position `after` is never caught (see canary-adaptive.ts for the
 * partial tamperer).
 */
import {
  type AdaptiveRate,
  createAdaptiveRate,
  createDetector,
  createRandom,
  type DriftModel,
  driftMetrics,
  quantile,
  wireRoundtrip
} from '../canary/index.js'
import { createTamper } from '../node/daemon/tamper.js'
import { mean, type Peer, round } from './canary-peers.js'

/**
 * A peer that tampers only late in sessions (every row at positions ≥ `after`, noise of 0.1 × the
 * output RMS, far above the benign spread): real steps until exclusion under the adaptive rate, with decoys running
 * through whole canaries (a prefill, then one row a step, as long as real sessions). With
 * canaries shorter than `after` it would never be caught.
 */
export function lateDetection(
  peers: readonly Peer[],
  o: { benign: DriftModel; rate?: AdaptiveRate; after?: number; trials?: number; maxSteps?: number }
) {
  const after = o.after ?? 64
  const rate = o.rate ?? createAdaptiveRate()
  const trials = o.trials ?? 5
  const maxSteps = o.maxSteps ?? 20_000
  const steps: number[] = []
  const canaries: number[] = []
  let seed = 5000
  for (const peer of peers) {
    const tamper = createTamper({ mode: 'noise', size: 0.1, rate: 1, seed: seed++, after })
    const drifts = peer.steps.map((s) => {
      const out = tamper.apply({
        sessionId: s.sessionId,
        stepId: s.stepId,
        input: s.input,
        output: s.raw,
        startPosition: s.position,
        rows: s.rows
      })
      return driftMetrics(wireRoundtrip(out, peer.dim, peer.wire), s.ref)
    })
    for (let k = 0; k < trials; k++) {
      const det = createDetector({ benign: o.benign })
      const rnd = createRandom(seed++)
      // each trial's decoys start at a different canary, each from its prefill
      const firstCanary = peer.steps.findIndex((s) => s.sessionId === peer.steps[(k * 97) % peer.steps.length].sessionId)
      let next = firstCanary
      let sent = 0
      let t = 1
      for (; t <= maxSteps; t++) {
        if (rnd.next() >= rate.rateFor(det.verdict('peer'))) continue
        sent++
        const i = next++ % drifts.length
        if (det.observe('peer', drifts[i], peer.key, peer.steps[i].position + peer.steps[i].rows).excluded) break
      }
      steps.push(t <= maxSteps ? t : Number.POSITIVE_INFINITY)
      canaries.push(sent)
    }
  }
  const finite = steps.filter((x) => Number.isFinite(x))
  return {
    after,
    trials: steps.length,
    notExcluded: steps.length - finite.length,
    meanSteps: round(mean(finite), 1),
    p90Steps: finite.length ? quantile(finite, 0.9) : null,
    meanCanaries: round(mean(canaries), 1)
  }
}
