/**
 * Canary detector evaluation: `npm run bench -- canary [--table] [--calibrate]`.
 * Grid: model/span × tamper mode × size × rate × benign profile × wire dtype, all computed in
 * process on real kernels and real canary sets (held-out prompts, not the calibration ones):
 * honest peer outputs are real kernel runs, tampered ones are the node's tamper functions
 * applied to them. Prints one JSON object (or, with --table, a markdown table of it).
 * `--calibrate` regenerates canary/default-calibration.ts from the bundled model instead;
 * `--adaptive` runs only the adaptive-rate simulations, `--overhead` only the cost measurement;
 * `--start-canaries N` / `--target-steps T` / `--start R` set the start-up burst (canary/adaptive-rate.ts).
 */
import { writeFileSync } from 'node:fs'
import {
  type AdaptiveRate,
  auroc,
  calibrateDefault,
  createAdaptiveRate,
  createDetector,
  type DriftFeature,
  type DriftModel,
  defaultBenignModel,
  densityRatio,
  driftMetrics,
  fixedRate,
  logDriftScore,
  measureCanaryOverhead,
  quantile,
  serializeDriftModel,
  WIRE_DTYPES,
  wireRoundtrip
} from '../canary/index.js'
import { createTamper, TAMPER_MODES, type TamperMode } from '../node/tamper.js'
import { adaptiveBenign, adaptiveDetection, lateDetection } from './canary-adaptive.js'
import {
  benignSpread,
  bundledModel,
  effectOverSpread,
  honestPeers,
  type Peer,
  round,
  SIZES,
  type Spread,
  shareOverSpread,
  tamperPass
} from './canary-peers.js'
import { type ConfigResult, markdownTable, RATES, summarize } from './canary-summary.js'

const MAX_CANARIES = 1500

function evaluate(
  peer: Peer,
  benign: DriftModel,
  spread: Spread,
  range: Spread,
  mode: TamperMode,
  size: number,
  rate: number,
  seed: number
): ConfigResult {
  const tamper = createTamper({ mode, size, rate, seed })
  const first = tamperPass(peer, tamper, 0)
  const hit = first.filter((x) => x.tampered)
  // The detector's own score: each step against benign drift at its position (before the ε cap).
  const pos = hit.map((x) => logDriftScore(benign, x.drift, peer.key, x.kvLength))
  const overSpread = effectOverSpread(spread, peer.wire, hit)
  const share = shareOverSpread(spread, peer.wire, hit)
  // against the whole range of benign drift: every honest peer of the wire at the step's position, and this configuration's own
  const shareOverRange = shareOverSpread(range, peer.wire, hit)
  const peerMax = Math.max(...peer.benignRelL2)
  const shareOverPeerMax = hit.length ? hit.filter((e) => e.effect > peerMax).length / hit.length : 0
  const det = createDetector({ benign })
  let canaries = 0
  let tampered = 0
  let excluded = false
  for (let pass = 0; canaries < MAX_CANARIES && !excluded; pass++) {
    for (const x of pass === 0 ? first : tamperPass(peer, tamper, pass)) {
      canaries++
      if (x.tampered) tampered++
      if ((excluded = det.observe('peer', x.drift, peer.key, x.kvLength).excluded)) break
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
    aurocCapped: pos.length
      ? auroc(
          hit.map((x) => Math.log(Math.max(1e-300, densityRatio(benign, x.drift, peer.key, x.kvLength)))),
          peer.benignCapped
        )
      : Number.NaN,
    aurocMaxAbs: pos.length
      ? auroc(
          hit.map((x) => x.peak),
          peer.benignPeak
        )
      : Number.NaN,
    aboveSpread: overSpread > 1,
    stepsAboveSpread: share,
    stepsAboveRange: shareOverRange,
    stepsAbovePeerMax: shareOverPeerMax,
    excluded,
    canaries,
    tamperedCanaries: tampered,
    positives: pos
  }
}

/**
 * Canary cost of a whole 256-token generation: from a new client (every peer new, so the start-up
 * burst is inside it) and from a long-lived one (peers past start-up, decoys carried on).
 */
function overhead(rate: AdaptiveRate) {
  const model = bundledModel()
  const benign = defaultBenignModel()
  const newPeers = measureCanaryOverhead({ model, benign, rate })
  // peers past start-up, of a long-lived client: its decoy sessions run on across generations
  const trustedPeers = measureCanaryOverhead({ model, benign, rate: fixedRate(rate.base), keepDecoys: true })
  return {
    // the 5 % target is read at the default (base) rate, peers past start-up; a new client's first
    // generation also pays its start-up burst (above the default rate). On a real swarm:
    // `npm run bench -- swarm-canary` (README "Canary cost on a real swarm").
    wholeGenerationExtraWork: { atDefaultRate: trustedPeers.extraWork, target: 0.05, newClientWithStartUp: newPeers.extraWork },
    newPeers,
    trustedPeers
  }
}

function calibrateCommand(argv: string[]): void {
  // `--features relL2,chord,peak`, `--max-points N`: the drift features and points of the density (drift-model.ts)
  const at = argv.indexOf('--features')
  const features = at >= 0 ? (argv[at + 1].split(',') as DriftFeature[]) : undefined
  const mp = argv.indexOf('--max-points')
  const c = calibrateDefault(bundledModel(), 1, features, mp >= 0 ? Number(argv[mp + 1]) : undefined)
  const path = new URL('../canary/default-calibration.ts', import.meta.url).pathname.replace('/dist/canary/', '/canary/')
  const json = serializeDriftModel(c.model)
  const head = '// Generated by `npm run bench -- canary --calibrate`: the default benign drift model (data).\n'
  writeFileSync(path, `${head}export const DEFAULT_CALIBRATION_JSON =\n  '${json}'\n`)
  console.log(JSON.stringify({ wrote: path, samples: c.samples.length, fallbacks: c.fallbacks, bytes: json.length }))
}

export async function main(argv: string[]): Promise<void> {
  if (argv.includes('--calibrate')) return calibrateCommand(argv)
  const t0 = Date.now()
  const opt = (name: string): number | undefined => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : undefined)
  const rate = createAdaptiveRate({
    start: opt('--start'),
    startCanaries: opt('--start-canaries'),
    targetSteps: opt('--target-steps')
  })
  if (argv.includes('--overhead')) {
    console.log(JSON.stringify({ command: 'npm run bench -- canary --overhead', overhead: overhead(rate) }))
    return
  }
  const benign = defaultBenignModel()
  const { peers, fallbacks } = honestPeers(benign)
  // Benign peers: every honest (span, profile, wire) stream through its own detector.
  let benignChecks = 0
  let benignExcluded = 0
  let maxBenignPosterior = 0
  for (const p of peers) {
    const det = createDetector({ benign })
    for (const s of p.steps) {
      const v = det.observe('peer', driftMetrics(wireRoundtrip(s.raw, p.dim, p.wire), s.ref), p.key, s.position + s.rows)
      benignChecks++
      maxBenignPosterior = Math.max(maxBenignPosterior, v.posterior)
    }
    if (det.excluded().length > 0) benignExcluded++
  }
  const spread = benignSpread(peers, WIRE_DTYPES)
  const range = benignSpread(peers, WIRE_DTYPES, 1)
  const pooledSpread = Object.fromEntries(
    WIRE_DTYPES.map((w) => [
      w,
      quantile(
        peers.filter((p) => p.wire === w).flatMap((p) => p.benignRelL2),
        0.99
      )
    ])
  )
  // The 10 %-tamperer under the adaptive per-peer rate, and benign peers' canary load under it.
  const adaptive = {
    detection: adaptiveDetection(peers, { benign, spread, rate }),
    benign: adaptiveBenign(peers, { benign, rate }),
    // a peer that tampers only at positions ≥ 64 (what short decoys never reached)
    lateTamperer: lateDetection(peers, { benign, rate, after: 64 })
  }
  if (argv.includes('--adaptive')) {
    console.log(
      JSON.stringify({
        command: 'npm run bench -- canary --adaptive',
        seconds: round((Date.now() - t0) / 1000, 1),
        benign: { peers: peers.length, checks: benignChecks, excluded: benignExcluded },
        adaptive
      })
    )
    return
  }
  const results: ConfigResult[] = []
  let seed = 100
  for (const mode of TAMPER_MODES) {
    for (const size of SIZES[mode])
      for (const rate of RATES) for (const p of peers) results.push(evaluate(p, benign, spread, range, mode, size, rate, seed++))
  }
  const overall = auroc(
    results.flatMap((r) => r.positives),
    peers.flatMap((p) => p.benignScores)
  )
  const summary = summarize(results, {
    adaptive,
    overhead: overhead(rate),
    spread,
    pooledSpread,
    benignChecks,
    benignExcluded,
    maxBenignPosterior,
    peers: peers.length,
    fallbacks,
    t0,
    overall
  })
  console.log(argv.includes('--table') ? markdownTable(summary) : JSON.stringify(summary))
}
