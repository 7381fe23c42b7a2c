import { createEdge, createShard, type ModelFile } from '../shards/index.js'
import { type AdaptiveRate, createAdaptiveRate } from './adaptive-rate.js'
import { buildCanarySet, type CanarySet, inputFor, referenceFor } from './canary-set.js'
import { createDetector } from './detector.js'
import { driftMetrics } from './drift.js'
import type { DriftModel } from './drift-model.js'
import { HELD_OUT_PROMPTS } from './prompts.js'
import { createRandom } from './rng.js'

const round = (x: number, d = 4): number => Math.round(x * 10 ** d) / 10 ** d
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]
const now = (): number => Number(process.hrtime.bigint()) / 1e6

export interface OverheadOptions {
  readonly model: ModelFile
  readonly benign: DriftModel
  readonly rate?: AdaptiveRate
  /** Tokens generated per run (default 256). */
  readonly tokens?: number
  /** Interleaved A/B rounds (default 9). */
  readonly rounds?: number
  /**
   * Decoy sessions carry on from one generation to the next, as a long-lived client's do (its
   * peers past start-up); otherwise every generation starts new decoys, as a new client does.
   */
  readonly keepDecoys?: boolean
}

/**
 * What canaries cost a generation, as extra work, on real kernels: a client generates `tokens`
 * tokens greedily through the whole model (its edges and head, and the remote blocks split in two
 * hops); after every token each hop gets a canary step of a decoy session with the probability
 * the adaptive rate gives for that hop's verdict, starting from new peers (the start-up phase
 * included), and the client scores each against its reference (drift + detector update). A
 * decoy is shaped as the real session: a prompt-sized prefill, then one row a step, as long as it.
 *  - extraWork: canary time (hop compute of decoy steps + client checks) / real generation time,
 *    both measured per call in the same run: what canaries add to the swarm's work per token.
 *  - abCost: wall time with canaries / without − 1 over interleaved runs (A, B, A, B, ...), median
 *    of the per-round ratios, so slow phases of a shared machine hit both sides of a round alike.
 * Decoy steps go beside real ones (off the critical path), so on a pipeline with idle hops the
 * user's decode rate loses less than extraWork; extraWork is the bound when every hop is busy.
 */
export function measureCanaryOverhead(options: OverheadOptions) {
  const { model } = options
  const n = model.config.nLayers
  const tokens = options.tokens ?? 256
  const rounds = options.rounds ?? 9
  const rate = options.rate ?? createAdaptiveRate()
  const mid = Math.max(2, Math.floor(n / 2))
  const hops = [
    { start: 1, end: mid },
    { start: mid, end: n - 1 }
  ].filter((h) => h.end > h.start)
  const prompt = [1, ...Array.from({ length: 11 }, (_, i) => 20 + i)]
  const maxLength = prompt.length + tokens
  // Canaries as long as the real session (its positions: the prompt, then a row per token but
  // the last); a decoy copies its shape: a prompt-sized prefill, then one row a step to the end.
  const positions = Math.min(maxLength - 1, model.config.seqLen)
  const sets: CanarySet[] = hops.map((h) =>
    buildCanarySet({
      model,
      boundary: h.start,
      ends: [h.end],
      prompts: HELD_OUT_PROMPTS.slice(0, 4),
      seed: 5,
      tokensPerPrompt: positions
    })
  )
  const edge = createEdge({ model })
  const full = createShard({ model, start: 0, end: n })
  const hopShards = hops.map((h) => createShard({ model, start: h.start, end: h.end }))
  const kept = hops.map(() => ({ canary: 0, position: 0, open: false }))

  const run = (withCanaries: boolean, seed: number) => {
    const det = createDetector({ benign: options.benign })
    const rnd = createRandom(seed)
    if (!options.keepDecoys) for (let k = 0; k < hops.length; k++) closeDecoy(k)
    const decoys = kept
    let realMs = 0
    let canaryMs = 0
    let canarySteps = 0
    let canaryRows = 0
    const t0 = now()
    full.openSession('real', { maxLength })
    let input = prompt
    let pos = 0
    for (let t = 0; t < tokens; t++) {
      const a = now()
      const out = full.forward('real', edge.embed(input), pos)
      const logits = edge.lastLogits(out, input.length)
      let next = 0
      for (let v = 1; v < logits.length; v++) if (logits[v] > logits[next]) next = v
      pos += input.length
      input = [next]
      realMs += now() - a
      if (!withCanaries) continue
      hops.forEach((h, k) => {
        const peer = `hop${k}`
        if (rnd.next() >= rate.rateFor(det.verdict(peer))) return
        const b = now()
        const d = decoys[k]
        const c = sets[k].canaries[d.canary]
        if (!d.open || d.position >= c.tokens.length) {
          if (d.open) hopShards[k].closeSession('decoy')
          d.canary = (d.canary + 1) % sets[k].canaries.length
          d.position = 0
          hopShards[k].openSession('decoy', { maxLength })
          d.open = true
        }
        const rows = d.position === 0 ? prompt.length : 1
        const got = hopShards[k].forward('decoy', inputFor(sets[k], d.canary, d.position, rows), d.position)
        det.observe(peer, driftMetrics(got, referenceFor(sets[k], d.canary, h.end, d.position, rows)), 'f32', d.position + rows)
        d.position += rows
        canarySteps++
        canaryRows += rows
        canaryMs += now() - b
      })
    }
    full.closeSession('real')
    return { wallMs: now() - t0, realMs, canaryMs, canarySteps, canaryRows, excluded: det.excluded().length }
  }

  const closeDecoy = (k: number): void => {
    if (kept[k].open) hopShards[k].closeSession('decoy')
    kept[k] = { canary: 0, position: 0, open: false }
  }
  try {
    run(true, 1) // warm-up
    const ratios: number[] = []
    const extra: number[] = []
    let steps = 0
    let rows = 0
    let excluded = 0
    for (let r = 0; r < rounds; r++) {
      const a = run(false, 100 + r)
      const b = run(true, 100 + r)
      ratios.push(b.wallMs / a.wallMs - 1)
      extra.push(b.canaryMs / b.realMs)
      steps += b.canarySteps
      rows += b.canaryRows
      excluded += b.excluded
    }
    return {
      tokens,
      rounds,
      hops: hops.map((h) => `[${h.start},${h.end})`),
      canaryStepsPerHopPerToken: round(steps / rounds / hops.length / tokens),
      canaryRowsPerHopPerToken: round(rows / rounds / hops.length / tokens),
      decoyPositions: positions,
      keepDecoys: options.keepDecoys ?? false,
      extraWork: round(median(extra)),
      abCost: round(median(ratios)),
      abCostPerRound: ratios.map((x) => round(x)),
      benignExcluded: excluded
    }
  } finally {
    full.close()
    for (const s of hopShards) s.close()
  }
}
