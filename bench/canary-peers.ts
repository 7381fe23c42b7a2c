/** Honest canary peers for the canary benchmarks: real kernel outputs on real canary sets. */
import {
  BENIGN_PROFILES,
  benignClassKey,
  buildCanarySet,
  calibrationRandomModels,
  createSpanRunner,
  type DriftModel,
  densityRatio,
  driftMetrics,
  HELD_OUT_PROMPTS,
  logDriftScore,
  positionBucket,
  profileKernels,
  quantile,
  quantizedWeights,
  runPeerSession,
  WIRE_DTYPES,
  type WireDType,
  wireRoundtrip
} from '../canary/index.js'
import type { createTamper, TamperMode } from '../node/daemon/tamper.js'
import { type ModelFile, openModelFile } from '../shards/index.js'

/** Tamper sizes of the grid per mode (lowprec: mantissa bits, fewer is bigger). */
export const SIZES: Record<TamperMode, number[]> = {
  noise: [1e-4, 1e-3, 1e-2, 1e-1],
  scale: [1e-4, 1e-3, 1e-2, 1e-1],
  bias: [1e-4, 1e-3, 1e-2, 1e-1],
  zero: [0.001, 0.01, 0.1],
  lowprec: [16, 10, 7, 3],
  skip: [1],
  replay: [1]
}

export interface Step {
  readonly sessionId: string
  readonly stepId: number
  /** Position of the step's first row in its (decoy) session, and its rows. */
  readonly position: number
  readonly rows: number
  readonly input: Float32Array
  readonly raw: Float32Array
  readonly ref: Float32Array
}
export interface Peer {
  readonly dim: number
  readonly span: string
  readonly profile: string
  readonly wire: WireDType
  /** The benign class the client scores this peer in (canary/calibrate.ts benignClassKey). */
  readonly key: string
  readonly steps: Step[]
  /** Detector scores of the honest steps: log f_T/f_B at each step's own position, before the ε cap (logDriftScore). */
  readonly benignScores: number[]
  /** The same scores capped as the sequential test caps them (log of densityRatio). */
  readonly benignCapped: number[]
  readonly benignRelL2: number[]
  /** Max-abs drift of the honest steps relative to the reference's RMS (a sparse-tampering statistic). */
  readonly benignPeak: number[]
  /** KV length after each honest step (position + rows), parallel to benignRelL2. */
  readonly benignKv: number[]
}

/** Benign spread per wire and position bucket ⌊log2 (kvLength − 1)⌋: 99th percentile of honest relL2. */
export type Spread = Record<string, number[]>

/**
 * The per-position benign spread over all honest peers (buckets under 50 samples borrow the
 * nearest): quantile `q` of honest relL2 (0.99 by default; 1 is the whole range, the largest).
 */
export function benignSpread(peers: readonly Peer[], wires: readonly string[], q = 0.99): Spread {
  const out: Spread = {}
  for (const w of wires) {
    const byBucket: number[][] = []
    for (const p of peers.filter((x) => x.wire === w))
      p.benignRelL2.forEach((r, i) => {
        ;(byBucket[positionBucket(p.benignKv[i])] ??= []).push(r)
      })
    const own = Array.from(byBucket, (v) => (v && v.length >= 50 ? quantile(v, q) : undefined))
    out[w] = own.map((_, b) => {
      for (let d = 0; d < own.length; d++) {
        const v = own[b - d] ?? own[b + d]
        if (v !== undefined) return v
      }
      return 0
    })
  }
  return out
}

/** The spread at a KV length (longer than calibrated: the last bucket's). */
export function spreadAt(spread: Spread, wire: string, kvLength: number): number {
  const s = spread[wire]
  return s[Math.min(s.length - 1, positionBucket(kvLength))]
}

/** Median over tampered steps of the tampering's own effect over the benign spread at the step's position. */
export function effectOverSpread(spread: Spread, wire: string, effects: readonly { effect: number; kvLength: number }[]): number {
  return effects.length
    ? quantile(
        effects.map((e) => e.effect / spreadAt(spread, wire, e.kvLength)),
        0.5
      )
    : 0
}

/** Share of tampered steps whose own effect exceeds the benign spread at the step's position. */
export function shareOverSpread(spread: Spread, wire: string, effects: readonly { effect: number; kvLength: number }[]): number {
  return effects.length ? effects.filter((e) => e.effect > spreadAt(spread, wire, e.kvLength)).length / effects.length : 0
}

/** max |output − reference| / rms(reference): what a single far-off value does to a step. */
export function relMaxAbs(d: { maxAbs: number }, ref: Float32Array): number {
  let ss = 0
  for (let i = 0; i < ref.length; i++) ss += ref[i] * ref[i]
  return d.maxAbs / Math.max(1e-30, Math.sqrt(ss / ref.length))
}

export const round = (x: number, d = 4): number => Math.round(x * 10 ** d) / 10 ** d
export const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN)

export function bundledModel(): ModelFile {
  for (const rel of ['../models/stories260K.gguf', '../../models/stories260K.gguf']) {
    try {
      return openModelFile(new URL(rel, import.meta.url).pathname)
    } catch {}
  }
  return openModelFile('models/stories260K.gguf')
}

/** Honest peers: every (model span, profile, wire), with its real per-step outputs. */
export function honestPeers(benign: DriftModel): { peers: Peer[]; fallbacks: string[] } {
  const bundled = bundledModel()
  const rnd = calibrationRandomModels()[0]
  const targets = [
    { name: 'stories260K', model: bundled, boundary: 1, ends: [2, 4] },
    { name: 'stories260K', model: bundled, boundary: 3, ends: [5] },
    { name: rnd.name, model: rnd.model, boundary: 1, ends: [3] }
  ]
  const peers: Peer[] = []
  const fallbacks = new Set<string>()
  for (const t of targets) {
    const set = buildCanarySet({ model: t.model, boundary: t.boundary, ends: t.ends, prompts: HELD_OUT_PROMPTS, seed: 7 })
    for (const profile of BENIGN_PROFILES) {
      const pk = profileKernels(profile)
      if (pk.fallback) fallbacks.add(profile)
      const runner = createSpanRunner({
        model: t.model,
        kernels: pk.kernels,
        kvDType: pk.kvDType,
        start: t.boundary,
        maxEnd: t.ends[t.ends.length - 1]
      })
      for (const wire of WIRE_DTYPES) {
        const byEnd = t.ends.map(
          (e): Peer => ({
            dim: set.dim,
            span: `${t.name}[${t.boundary},${e})`,
            profile,
            wire,
            key: benignClassKey(wire, pk.kvDType, quantizedWeights(t.model)),
            steps: [],
            benignScores: [],
            benignCapped: [],
            benignRelL2: [],
            benignPeak: [],
            benignKv: []
          })
        )
        set.canaries.forEach((c, i) => {
          const s = runPeerSession(runner, set, i, wire)
          t.ends.forEach((_, k) => {
            let pos = 0
            s.steps.forEach((rows, stepId) => {
              const rowsOf = (a: Float32Array) => a.subarray(pos * set.dim, (pos + rows) * set.dim)
              const step = {
                sessionId: `c${i}`,
                stepId,
                position: pos,
                rows,
                input: rowsOf(s.input),
                raw: rowsOf(s.outputs[k]),
                ref: rowsOf(c.outputs[k])
              }
              const d = driftMetrics(wireRoundtrip(step.raw, set.dim, wire), step.ref)
              byEnd[k].steps.push(step)
              byEnd[k].benignScores.push(logDriftScore(benign, d, byEnd[k].key, pos + rows))
              byEnd[k].benignCapped.push(Math.log(Math.max(1e-300, densityRatio(benign, d, byEnd[k].key, pos + rows))))
              byEnd[k].benignRelL2.push(d.relL2)
              byEnd[k].benignPeak.push(relMaxAbs(d, step.ref))
              byEnd[k].benignKv.push(pos + rows)
              pos += rows
            })
          })
        })
        peers.push(...byEnd)
      }
      runner.close()
      pk.close()
    }
  }
  return { peers, fallbacks: [...fallbacks] }
}

/** One pass over a peer's canary steps through a tamperer: drift and whether each was tampered. */
export function tamperPass(peer: Peer, tamper: ReturnType<typeof createTamper>, pass: number) {
  return peer.steps.map((s) => {
    const out = tamper.apply({ sessionId: `p${pass}-${s.sessionId}`, stepId: s.stepId, input: s.input, output: s.raw })
    const drift = driftMetrics(wireRoundtrip(out, peer.dim, peer.wire), s.ref)
    const kvLength = s.position + s.rows
    const effect = out !== s.raw ? driftMetrics(out, s.raw).relL2 : 0
    return { drift, kvLength, tampered: out !== s.raw, effect, peak: relMaxAbs(drift, s.ref) }
  })
}
