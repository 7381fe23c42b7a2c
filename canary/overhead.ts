import { createShard, type ModelFile } from '../shards/index.js'
import { createDetector } from './detector.js'
import { driftMetrics } from './drift.js'
import type { DriftModel } from './drift-model.js'
import { createCanaryScheduler } from './mixing.js'

const round = (x: number, d = 4): number => Math.round(x * 10 ** d) / 10 ** d

/**
 * The cost of canaries on a real shard (blocks [1, 4) of the model): 3000 decode steps of a real
 * session, with and without the decoy session steps the scheduler adds at `rate` (best of two
 * runs each), plus the client's cost per canary check (drift metrics and one detector update).
 */
export function measureCanaryOverhead(options: { model: ModelFile; rate?: number; benign: DriftModel }): Record<string, number> {
  const { model } = options
  const rate = options.rate ?? 0.03
  const shard = createShard({ model, start: 1, end: 4 })
  const dim = model.config.dim
  const sched = createCanaryScheduler({ rate: rate, seed: 3 })
  const ticks = Array.from({ length: 3000 }, () => sched.onRealStep())
  const row = new Float32Array(dim).map((_, i) => Math.sin(i))
  const run = (withCanaries: boolean): number => {
    shard.openSession('real', { maxLength: 512 })
    shard.openSession('canary', { maxLength: 512 })
    let pos = 0
    let cpos = 0
    const t0 = process.hrtime.bigint()
    for (const t of ticks) {
      if (pos >= 500) {
        shard.rewind('real', 0)
        pos = 0
      }
      shard.forward('real', row, pos++)
      if (withCanaries && t.send) {
        if (t.start || cpos >= 500) cpos = 0
        shard.forward('canary', row, cpos++)
      }
    }
    return Number(process.hrtime.bigint() - t0) / 1e6
  }
  run(true)
  const base = Math.min(run(false), run(false))
  const withC = Math.min(run(true), run(true))
  const st = sched.stats()
  // The client's side of a canary: drift metrics and one detector update.
  const det = createDetector({ benign: options.benign })
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < 2000; i++) det.observe('x', driftMetrics(row, row.map((v) => v * 1.0001)), 'f32')
  const checkMs = Number(process.hrtime.bigint() - t0) / 1e6 / 2000
  return {
    defaultRate: rate,
    extraStepsFraction: round(st.fraction),
    peerComputeOverhead: round((withC - base) / withC),
    decodeThroughputCost: round(1 - base / withC),
    clientCheckMsPerCanary: round(checkMs),
    stepMs: round(base / ticks.length)
  }
}

