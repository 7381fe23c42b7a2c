/** The canary benchmark's summary JSON and its markdown table (bench/canary.ts). */
import { WIRE_DTYPES, type WireDType } from '../canary/index.js'
import { TAMPER_MODES, type TamperMode } from '../node/tamper.js'
import { mean, round, SIZES } from './canary-peers.js'

export const RATES = [1, 0.1]
/** The base canary rate the fixed-rate step counts are given at. */
const CANARY_RATE = 0.03

export interface ConfigResult {
  readonly span: string
  readonly profile: string
  readonly wire: WireDType
  readonly mode: TamperMode
  readonly size: number
  readonly rate: number
  readonly auroc: number
  /**
   * Tampering's own effect exceeds the benign spread at its positions: the median over tampered
   * steps of (relL2 of tampered vs honest output) / (99th percentile of honest relL2 over all
   * honest peers of the wire in the step's KV-length bucket ⌊log2 kvLength⌋) is above 1.
   */
  readonly aboveSpread: boolean
  readonly excluded: boolean
  readonly canaries: number
  readonly tamperedCanaries: number
  readonly positives: number[]
}

interface BenignSummary {
  adaptive: unknown
  overhead: { newPeers: OverheadResult; trustedPeers: OverheadResult }
  /** Per wire, per KV-length bucket ⌊log2 kvLength⌋. */
  spread: Record<string, number[]>
  /** Per wire, over all positions (the old, position-blind spread; for comparison). */
  pooledSpread: Record<string, number>
  benignChecks: number
  benignExcluded: number
  maxBenignPosterior: number
  peers: number
  fallbacks: string[]
  t0: number
  overall: number
}

export function summarize(results: ConfigResult[], b: BenignSummary) {
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
        results
          .filter((r) => r.mode === mode && r.wire === wire && r.size === size && r.rate === 1)
          .every((r) => r.auroc >= 0.99 && r.excluded)
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
      spreadRelL2: Object.fromEntries(Object.entries(b.pooledSpread).map(([k, v]) => [k, Number(v.toPrecision(3))])),
      spreadRelL2ByLog2KvLength: Object.fromEntries(
        Object.entries(b.spread).map(([k, v]) => [k, v.map((x) => Number(x.toPrecision(3)))])
      )
    },
    detection,
    smallestDetectableSize: smallest,
    adaptive: b.adaptive,
    overhead: b.overhead,
    perConfigColumns: ['span', 'profile', 'wire', 'mode', 'size', 'rate', 'auroc', 'aboveSpread', 'excluded', 'canaries'],
    perConfig: results.map((r) => [
      r.span,
      r.profile,
      r.wire,
      r.mode,
      r.size,
      r.rate,
      round(r.auroc),
      r.aboveSpread,
      r.excluded,
      r.canaries
    ])
  }
}

/** A short markdown table of the summary (for the README). */
export function markdownTable(s: ReturnType<typeof summarize>): string {
  const lines = [
    `Command: \`${s.command}\` (${s.configurations} configurations, ${s.seconds} s)`,
    '',
    '| metric | value |',
    '|---|---|',
    `| AUROC overall (pooled per-canary scores) | ${s.auroc.overall} |`,
    `| configurations with AUROC 1.0 where tampering exceeds the benign spread | ${s.auroc.aboveSpreadAt1} / ${s.auroc.aboveSpreadConfigs} (min ${s.auroc.aboveSpreadMin}) |`,
    `| benign peers excluded | ${s.benign.excluded} / ${s.benign.peers} over ${s.benign.checks} canary checks (max posterior ${s.benign.maxPosterior}) |`,
    `| canary steps per hop per token, 256-token generation, new / trusted peers | ${s.overhead.newPeers.canaryStepsPerHopPerToken} / ${s.overhead.trustedPeers.canaryStepsPerHopPerToken} |`,
    `| extra work (canary time / generation time), new / trusted peers | ${s.overhead.newPeers.extraWork} / ${s.overhead.trustedPeers.extraWork} |`,
    `| A/B wall-time cost (median of interleaved rounds), new / trusted peers | ${s.overhead.newPeers.abCost} / ${s.overhead.trustedPeers.abCost} |`,
    '',
    '| mode@rate | excluded | mean canaries to exclusion | steps at rate 0.03 |',
    '|---|---|---|---|'
  ]
  for (const [k, v] of Object.entries(s.detection) as [string, Record<string, number>][]) {
    lines.push(`| ${k} | ${v.excluded}/${v.configs} | ${v.meanCanaries} | ${v.stepsAtDefaultRate} |`)
  }
  lines.push('', '| mode | smallest detectable size f32 / f16 / int8 wire |', '|---|---|')
  for (const [m, w] of Object.entries(s.smallestDetectableSize))
    lines.push(`| ${m} | ${w.f32 ?? '–'} / ${w.f16 ?? '–'} / ${w.int8 ?? '–'} |`)
  return lines.join('\n')
}

type OverheadResult = { canaryStepsPerHopPerToken: number; extraWork: number; abCost: number } & Record<string, unknown>
