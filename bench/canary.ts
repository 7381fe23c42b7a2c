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
  BENIGN_PROFILES,
  calibrate,
  calibrateDefault,
  calibrationQuantizedModels,
  createAdaptiveRate,
  createDetector,
  DEFAULT_CANARY_PROMPTS,
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
import { createTamper, TAMPER_MODES, type TamperMode } from '../node/daemon/tamper.js'
import { adaptiveBenign, adaptiveDetection } from './canary-adaptive.js'
import { lateDetection } from './canary-late.js'
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
  const maxPoints = mp >= 0 ? Number(argv[mp + 1]) : undefined
  // `--only-quantized`: remeasure the /qw classes alone (on calibrationQuantizedModels: every KV
  // dtype on the reference and native kernels, and WebAssembly, against references from both) and
  // put them in place of the shipped ones; the other classes stay as they are. 4 prompts of 96
  // positions: the whole grid at 16 × 128 takes the better part of an hour on 2 cores.
  const onlyQuantized = argv.includes('--only-quantized')
  const c = onlyQuantized
    ? calibrate({
        targets: calibrationQuantizedModels().map(({ model }) => ({ model, boundaries: [1] })),
        seed: 1,
        features,
        maxPoints,
        profiles: BENIGN_PROFILES.filter((p) => p !== 'wasm-2t'),
        prompts: DEFAULT_CANARY_PROMPTS.slice(0, 4),
        tokensPerPrompt: 96
      })
    : calibrateDefault(bundledModel(), 1, features, maxPoints)
  const model = withBenignFloor(
    onlyQuantized ? withClasses(defaultBenignModel(), c.model, (k) => k.includes('/qw')) : c.model,
    (k) => k.includes('/qw')
  )
  const path = new URL('../canary/default-calibration.ts', import.meta.url).pathname.replace('/dist/canary/', '/canary/')
  const json = serializeDriftModel(model)
  const head =
    '// Generated by `npm run bench -- canary --calibrate`: the default benign drift model (data).\n' +
    (onlyQuantized ? QUANTIZED_NOTE : '')
  writeFileSync(path, `${head}export const DEFAULT_CALIBRATION_JSON =\n  '${json}'\n`)
  const classes = Object.keys(model.classes)
  console.log(JSON.stringify({ wrote: path, samples: c.samples.length, fallbacks: c.fallbacks, classes, bytes: json.length }))
}

/**
 * Classes of quantised weights (`/qw`) get a benign floor: points along the diagonal relL2 = chord
 * from the class's lower edge to its largest drift, FLOOR_WEIGHT of the mass in all. Their benign
 * drift is a continuum: a kernel that quantises activations rounds an input that moved by a KV
 * cache's or a wire's rounding to the same value, or not, value by value, so an honest answer
 * lies anywhere between exact and the kernels' own ~1 % rounding. The calibration samples that
 * range unevenly, and a narrow kernel density left gaps where an honest f16-cache node's answers
 * (3–4e-4 on a held-out 256-dim Q4_K_M model) scored at the cap, 1/ε (issue 16). Drift below
 * the class's largest benign drift cannot tell tampering there anyway.
 */
const QUANTIZED_NOTE =
  '// Its /qw classes were remeasured by `--calibrate --only-quantized` (reference, WebAssembly and\n' +
  '// native kernels with f32, f16 and q8_0 KV caches, against references from the reference and the\n' +
  '// native kernels, with a benign floor); the other classes are as measured before.\n'
const FLOOR_WEIGHT = 0.02
const FLOOR_STEP = 0.025

export function withBenignFloor(model: DriftModel, pick: (key: string) => boolean): DriftModel {
  const dims = (model.features ?? ['relL2', 'chord']).length
  const classes = { ...model.classes }
  for (const [k, c] of Object.entries(classes)) {
    if (!pick(k) || c.points.length === 0) continue
    let top = Number.NEGATIVE_INFINITY
    for (let i = 0; i < c.points.length; i += dims) top = Math.max(top, ...c.points.slice(i, i + dims))
    const from = Math.min(...c.lower)
    const n = Math.max(2, Math.ceil((top - from) / FLOOR_STEP) + 1)
    const points = [...c.points]
    const weights = c.weights.map((w) => w * (1 - FLOOR_WEIGHT))
    for (let j = 0; j < n; j++) {
      const v = Math.round((from + ((top - from) * j) / (n - 1)) * 1e4) / 1e4
      for (let d = 0; d < dims; d++) points.push(v)
      weights.push(Math.round((FLOOR_WEIGHT / n) * 1e7) / 1e7)
    }
    classes[k] = { ...c, points, weights }
  }
  return { ...model, classes, note: `${model.note ?? ''}; /qw classes with a benign floor (${FLOOR_WEIGHT})` }
}

/** `base` with the classes of `from` whose key `pick` accepts put in (the note says so). */
function withClasses(base: DriftModel, from: DriftModel, pick: (key: string) => boolean): DriftModel {
  const classes = { ...base.classes }
  const taken = Object.keys(from.classes).filter(pick)
  for (const k of taken) classes[k] = from.classes[k]
  return { ...base, classes, note: `${base.note ?? ''}; remeasured ${taken.join(',')} (${from.note ?? ''})` }
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
