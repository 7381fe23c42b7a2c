/**
 * Canary detector evaluation: `npm run bench -- canary [--table] [--calibrate]`.
 * Grid: model/span × tamper mode × size × rate × benign profile × wire dtype, all computed in
 * process on real kernels and real canary sets (held-out prompts, not the calibration ones):
 * honest peer outputs are real kernel runs, tampered ones are the node's tamper functions
 * applied to them. Prints one JSON object (or, with --table, a markdown table of it).
 * `--calibrate` regenerates canary/default-calibration.ts from the bundled model instead.
 */
import { writeFileSync } from 'node:fs'
import {
  auroc, BENIGN_PROFILES, buildCanarySet, calibrateDefault, calibrationRandomModels, createDetector, createSpanRunner, type DriftModel, defaultBenignModel, densityRatio, driftMetrics, HELD_OUT_PROMPTS, measureCanaryOverhead, profileKernels, quantile, runPeerSession, serializeDriftModel, WIRE_DTYPES, type WireDType, wireRoundtrip
} from '../canary/index.js'
import { createTamper, TAMPER_MODES, type TamperMode } from '../node/tamper.js'
import { type ModelFile, openModelFile } from '../shards/index.js'

const SIZES: Record<TamperMode, number[]> = {
  noise: [1e-4, 1e-3, 1e-2, 1e-1],
  scale: [1e-4, 1e-3, 1e-2, 1e-1],
  bias: [1e-4, 1e-3, 1e-2, 1e-1],
  zero: [0.001, 0.01, 0.1],
  lowprec: [16, 10, 7, 3],
  skip: [1],
  replay: [1]
}
const RATES = [1, 0.1]
const MAX_CANARIES = 1500
const CANARY_RATE = 0.03

interface Step {
  readonly sessionId: string
  readonly stepId: number
  readonly input: Float32Array
  readonly raw: Float32Array
  readonly ref: Float32Array
}
interface Peer {
  readonly dim: number
  readonly span: string
  readonly profile: string
  readonly wire: WireDType
  readonly steps: Step[]
  readonly benignScores: number[]
  readonly benignRelL2: number[]
}

const score = (r: number): number => Math.log(Math.max(r, 1e-300))
const round = (x: number, d = 4): number => Math.round(x * 10 ** d) / 10 ** d
const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN)

function bundledModel(): ModelFile {
  for (const rel of ['../models/stories260K.gguf', '../../models/stories260K.gguf']) {
    try {
      return openModelFile(new URL(rel, import.meta.url).pathname)
    } catch {}
  }
  return openModelFile('models/stories260K.gguf')
}

/** Honest peers: every (model span, profile, wire), with its real per-step outputs. */
function honestPeers(benign: DriftModel): { peers: Peer[]; fallbacks: string[] } {
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
      const runner = createSpanRunner({ model: t.model, kernels: pk.kernels, kvDType: pk.kvDType, start: t.boundary, maxEnd: t.ends[t.ends.length - 1] })
      for (const wire of WIRE_DTYPES) {
        const byEnd = t.ends.map((e): Peer => ({ dim: set.dim, span: `${t.name}[${t.boundary},${e})`, profile, wire, steps: [], benignScores: [], benignRelL2: [] }))
        set.canaries.forEach((c, i) => {
          const s = runPeerSession(runner, set, i, wire)
          t.ends.forEach((_, k) => {
            let pos = 0
            s.steps.forEach((rows, stepId) => {
              const rowsOf = (a: Float32Array) => a.subarray(pos * set.dim, (pos + rows) * set.dim)
              const step = { sessionId: `c${i}`, stepId, input: rowsOf(s.input), raw: rowsOf(s.outputs[k]), ref: rowsOf(c.outputs[k]) }
              const d = driftMetrics(wireRoundtrip(step.raw, set.dim, wire), step.ref)
              byEnd[k].steps.push(step)
              byEnd[k].benignScores.push(score(densityRatio(benign, d, wire)))
              byEnd[k].benignRelL2.push(d.relL2)
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
function tamperPass(peer: Peer, tamper: ReturnType<typeof createTamper>, pass: number) {
  return peer.steps.map((s) => {
    const out = tamper.apply({ sessionId: `p${pass}-${s.sessionId}`, stepId: s.stepId, input: s.input, output: s.raw })
    const drift = driftMetrics(wireRoundtrip(out, peer.dim, peer.wire), s.ref)
    return { drift, tampered: out !== s.raw, effect: out !== s.raw ? driftMetrics(out, s.raw).relL2 : 0 }
  })
}

interface ConfigResult {
  readonly span: string
  readonly profile: string
  readonly wire: WireDType
  readonly mode: TamperMode
  readonly size: number
  readonly rate: number
  readonly auroc: number
  /** Tampering's own effect (median relL2 of tampered vs honest output) exceeds the wire's benign spread (99th percentile over all honest peers). */
  readonly aboveSpread: boolean
  readonly excluded: boolean
  readonly canaries: number
  readonly tamperedCanaries: number
  readonly positives: number[]
}

function evaluate(peer: Peer, benign: DriftModel, spread: number, mode: TamperMode, size: number, rate: number, seed: number): ConfigResult {
  const tamper = createTamper({ mode, size, rate, seed })
  const first = tamperPass(peer, tamper, 0)
  const hit = first.filter((x) => x.tampered)
  const pos = hit.map((x) => score(densityRatio(benign, x.drift, peer.wire)))
  const effect = hit.length ? quantile(hit.map((x) => x.effect), 0.5) : 0
  const det = createDetector({ benign })
  let canaries = 0
  let tampered = 0
  let excluded = false
  for (let pass = 0; canaries < MAX_CANARIES && !excluded; pass++) {
    for (const x of pass === 0 ? first : tamperPass(peer, tamper, pass)) {
      canaries++
      if (x.tampered) tampered++
      if ((excluded = det.observe('peer', x.drift, peer.wire).excluded)) break
      if (canaries >= MAX_CANARIES) break
    }
  }
  return {
    span: peer.span,
    profile: peer.profile,
    wire: peer.wire,
    mode,
    size,
    rate,
    auroc: pos.length ? auroc(pos, peer.benignScores) : Number.NaN,
    aboveSpread: effect > spread,
    excluded,
    canaries,
    tamperedCanaries: tampered,
    positives: pos
  }
}

function calibrateCommand(): void {
  const c = calibrateDefault(bundledModel())
  const path = new URL('../canary/default-calibration.ts', import.meta.url).pathname.replace('/dist/canary/', '/canary/')
  const json = serializeDriftModel(c.model)
  const head = '// Generated by `npm run bench -- canary --calibrate`: the default benign drift model (data).\n'
  writeFileSync(path, `${head}export const DEFAULT_CALIBRATION_JSON =\n  '${json}'\n`)
  console.log(JSON.stringify({ wrote: path, samples: c.samples.length, fallbacks: c.fallbacks, bytes: json.length }))
}

export async function main(argv: string[]): Promise<void> {
  if (argv.includes('--calibrate')) return calibrateCommand()
  const t0 = Date.now()
  const benign = defaultBenignModel()
  const { peers, fallbacks } = honestPeers(benign)
  // Benign peers: every honest (span, profile, wire) stream through its own detector.
  let benignChecks = 0
  let benignExcluded = 0
  let maxBenignPosterior = 0
  for (const p of peers) {
    const det = createDetector({ benign })
    for (const s of p.steps) {
      const v = det.observe('peer', driftMetrics(wireRoundtrip(s.raw, p.dim, p.wire), s.ref), p.wire)
      benignChecks++
      maxBenignPosterior = Math.max(maxBenignPosterior, v.posterior)
    }
    if (det.excluded().length > 0) benignExcluded++
  }
  const results: ConfigResult[] = []
  let seed = 100
  const spread = Object.fromEntries(WIRE_DTYPES.map((w) => [w, quantile(peers.filter((p) => p.wire === w).flatMap((p) => p.benignRelL2), 0.99)]))
  for (const mode of TAMPER_MODES) {
    for (const size of SIZES[mode]) for (const rate of RATES) for (const p of peers) results.push(evaluate(p, benign, spread[p.wire], mode, size, rate, seed++))
  }
  const overall = auroc(
    results.flatMap((r) => r.positives),
    peers.flatMap((p) => p.benignScores)
  )
  const summary = summarize(results, { spread, benignChecks, benignExcluded, maxBenignPosterior, peers: peers.length, fallbacks, t0, overall })
  console.log(argv.includes('--table') ? markdownTable(summary) : JSON.stringify(summary))
}

interface BenignSummary {
  spread: Record<string, number>
  benignChecks: number
  benignExcluded: number
  maxBenignPosterior: number
  peers: number
  fallbacks: string[]
  t0: number
  overall: number
}

function summarize(results: ConfigResult[], b: BenignSummary) {
  const valid = results.filter((r) => !Number.isNaN(r.auroc))
  const above = valid.filter((r) => r.aboveSpread)
  const detection: Record<string, unknown> = {}
  for (const mode of TAMPER_MODES) {
    for (const rate of RATES) {
      const rs = results.filter((r) => r.mode === mode && r.rate === rate && r.aboveSpread)
      const ex = rs.filter((r) => r.excluded)
      const c = mean(ex.map((r) => r.canaries))
      detection[`${mode}@${rate}`] = {
        configs: rs.length,
        excluded: ex.length,
        meanCanaries: round(c, 1),
        meanTamperedCanaries: round(mean(ex.map((r) => r.tamperedCanaries)), 1),
        stepsAtDefaultRate: round(c / CANARY_RATE, 0),
        canaryRateFor100Steps: round(c / 100, 3)
      }
    }
  }
  const smallest: Record<string, Record<string, number | null>> = {}
  for (const mode of TAMPER_MODES) {
    smallest[mode] = {}
    for (const wire of WIRE_DTYPES) {
      const ok = SIZES[mode].filter((size) =>
        results.filter((r) => r.mode === mode && r.wire === wire && r.size === size && r.rate === 1).every((r) => r.auroc >= 0.99 && r.excluded)
      )
      // lowprec: fewer mantissa bits is a bigger change, so "smallest change" is the most bits.
      smallest[mode][wire] = ok.length === 0 ? null : mode === 'lowprec' ? Math.max(...ok) : Math.min(...ok)
    }
  }
  return {
    command: 'npm run bench -- canary',
    seconds: round((Date.now() - b.t0) / 1000, 1),
    configurations: results.length,
    auroc: {
      overall: round(b.overall),
      meanPerConfig: round(mean(valid.map((r) => r.auroc))),
      configsAt1: valid.filter((r) => r.auroc === 1).length,
      aboveSpreadConfigs: above.length,
      aboveSpreadAt1: above.filter((r) => r.auroc === 1).length,
      aboveSpreadMin: round(Math.min(...above.map((r) => r.auroc)))
    },
    benign: {
      peers: b.peers,
      checks: b.benignChecks,
      excluded: b.benignExcluded,
      falsePositiveRate: round(b.benignExcluded / b.peers),
      maxPosterior: round(b.maxBenignPosterior, 6),
      kernelFallbacks: b.fallbacks,
      spreadRelL2: Object.fromEntries(Object.entries(b.spread).map(([k, v]) => [k, Number(v.toPrecision(3))]))
    },
    detection,
    smallestDetectableSize: smallest,
    overhead: measureCanaryOverhead({ model: bundledModel(), rate: CANARY_RATE, benign: defaultBenignModel() }),
    perConfigColumns: ['span', 'profile', 'wire', 'mode', 'size', 'rate', 'auroc', 'aboveSpread', 'excluded', 'canaries'],
    perConfig: results.map((r) => [r.span, r.profile, r.wire, r.mode, r.size, r.rate, round(r.auroc), r.aboveSpread, r.excluded, r.canaries])
  }
}

/** A short markdown table of the summary (for the README). */
function markdownTable(s: ReturnType<typeof summarize>): string {
  const lines = [
    `Command: \`${s.command}\` (${s.configurations} configurations, ${s.seconds} s)`,
    '',
    '| metric | value |',
    '|---|---|',
    `| AUROC overall (pooled per-canary scores) | ${s.auroc.overall} |`,
    `| configurations with AUROC 1.0 where tampering exceeds the benign spread | ${s.auroc.aboveSpreadAt1} / ${s.auroc.aboveSpreadConfigs} (min ${s.auroc.aboveSpreadMin}) |`,
    `| benign peers excluded | ${s.benign.excluded} / ${s.benign.peers} over ${s.benign.checks} canary checks (max posterior ${s.benign.maxPosterior}) |`,
    `| canary steps / all steps at the default rate | ${s.overhead.extraStepsFraction} |`,
    `| decode throughput cost on a real shard | ${s.overhead.decodeThroughputCost} |`,
    '',
    '| mode@rate | excluded | mean canaries to exclusion | steps at rate 0.03 |',
    '|---|---|---|---|'
  ]
  for (const [k, v] of Object.entries(s.detection) as [string, Record<string, number>][]) {
    lines.push(`| ${k} | ${v.excluded}/${v.configs} | ${v.meanCanaries} | ${v.stepsAtDefaultRate} |`)
  }
  lines.push('', '| mode | smallest detectable size f32 / f16 / int8 wire |', '|---|---|')
  for (const [m, w] of Object.entries(s.smallestDetectableSize)) lines.push(`| ${m} | ${w.f32 ?? '–'} / ${w.f16 ?? '–'} / ${w.int8 ?? '–'} |`)
  return lines.join('\n')
}
