/** The canary benchmark's summary JSON and its markdown table (bench/canary.ts). */
import { WIRE_DTYPES, type WireDType } from '../canary/index.js'
import { TAMPER_MODES, type TamperMode } from '../node/daemon/tamper.js'
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
  /** AUROC of the detector's per-canary score before the ε cap (logDriftScore) against the peer's honest steps. */
  readonly auroc: number
  /** The same with the capped density ratio of the sequential test (far-off drifts tie at 1/ε). */
  readonly aurocCapped: number
  /**
   * AUROC of a sparse-tampering statistic instead: max-abs drift over the reference's RMS (one
   * value zeroed moves it by that value; relative L2 only by the value over ‖row‖). Reported to
   * tell, per miss, whether another per-step statistic would separate what relative L2 does not.
   */
  readonly aurocMaxAbs: number
  /**
   * Tampering's own effect exceeds the benign spread at its positions: the median over tampered
   * steps of (relL2 of tampered vs honest output) / (99th percentile of honest relL2 over all
   * honest peers of the wire in the step's position bucket ⌊log2 (kvLength − 1)⌋) is above 1.
   */
  readonly aboveSpread: boolean
  /**
   * Share of tampered steps whose own effect exceeds the benign spread at the step's position.
   * The AUROC target is read on configurations where this is 1: AUROC 1.0 asks every tampered
   * step to score above every honest one, which a step the tampering changed by less than the
   * benign spread cannot do (zero at 0.001–0.01 of values zeroes one value of a row: when it
   * is a small one, that step changes by less than rounding does).
   */
  readonly stepsAboveSpread: number
  /** The same against the whole range (largest honest relL2) of every honest peer of the wire in the step's bucket. */
  readonly stepsAboveRange: number
  /** The same against the largest honest relL2 of this configuration's own honest peer (any position). */
  readonly stepsAbovePeerMax: number
  readonly excluded: boolean
  readonly canaries: number
  readonly tamperedCanaries: number
  readonly positives: number[]
}

interface BenignSummary {
  adaptive: unknown
  overhead: { newPeers: OverheadResult; trustedPeers: OverheadResult } & Record<string, unknown>
  /** Per wire, per position bucket ⌊log2 (kvLength − 1)⌋. */
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
  const median = valid.filter((r) => r.aboveSpread)
  const above = valid.filter((r) => r.stepsAboveSpread === 1)
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
      // every tampered step changes the output by more than the benign spread at its position
      aboveSpreadConfigs: above.length,
      aboveSpreadAt1: above.filter((r) => r.auroc === 1).length,
      aboveSpreadMin: round(Math.min(...above.map((r) => r.auroc))),
      // the median tampered step does (the earlier definition), and what the capped ratio gives there
      medianAboveSpread: {
        configs: median.length,
        at1: median.filter((r) => r.auroc === 1).length,
        min: round(Math.min(...median.map((r) => r.auroc))),
        cappedAt1: median.filter((r) => r.aurocCapped === 1).length,
        notEveryStepAbove: median.length - median.filter((r) => r.stepsAboveSpread === 1).length
      },
      misses: misses(above),
      // "the benign spread" read as its whole range rather than its 99th percentile (a 99th
      // percentile leaves 1 % of honest steps above it by construction, so a tampering just over
      // it cannot reach AUROC 1.0): pooled over the wire's honest peers per position bucket, and
      // this configuration's own honest peer
      aboveRange: readingOf(valid.filter((r) => r.stepsAboveRange === 1)),
      abovePeerMax: readingOf(valid.filter((r) => r.stepsAbovePeerMax === 1)),
      // the 99th-percentile misses, and whether they qualify under the range readings
      missesVsRange: above
        .filter((r) => r.auroc < 1)
        .map((r) => ({
          span: r.span,
          profile: r.profile,
          wire: r.wire,
          mode: r.mode,
          size: r.size,
          rate: r.rate,
          auroc: round(r.auroc, 6),
          stepsAboveRange: round(r.stepsAboveRange),
          stepsAbovePeerMax: round(r.stepsAbovePeerMax)
        })),
      // configurations below 1.0 where only the median step exceeds the spread, per mode@size
      medianOnlyMisses: missAnalysis(median.filter((r) => r.stepsAboveSpread < 1))
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
    perConfigColumns: [
      'span',
      'profile',
      'wire',
      'mode',
      'size',
      'rate',
      'auroc',
      'aboveSpread',
      'excluded',
      'canaries',
      'aurocCapped',
      'stepsAboveSpread',
      'aurocMaxAbs'
    ],
    perConfig: results.map((r) => [
      r.span,
      r.profile,
      r.wire,
      r.mode,
      r.size,
      r.rate,
      round(r.auroc, 6),
      r.aboveSpread,
      r.excluded,
      r.canaries,
      round(r.aurocCapped),
      round(r.stepsAboveSpread),
      round(r.aurocMaxAbs)
    ])
  }
}

/** Configurations below AUROC 1.0, per mode@size: how many and the lowest AUROC. */
function misses(rs: readonly ConfigResult[]): Record<string, { configs: number; min: number }> {
  const out: Record<string, { configs: number; min: number }> = {}
  for (const r of rs.filter((x) => x.auroc < 1)) {
    const m = (out[`${r.mode}@${r.size}`] ??= { configs: 0, min: 1 })
    m.configs++
    m.min = round(Math.min(m.min, r.auroc), 6)
  }
  return out
}

function readingOf(rs: readonly ConfigResult[]) {
  return { configs: rs.length, at1: rs.filter((r) => r.auroc === 1).length, min: round(Math.min(...rs.map((r) => r.auroc)), 6) }
}

/** Misses of a set of configurations per mode@size, with the share of their steps above the spread and the max-abs AUROC. */
function missAnalysis(rs: readonly ConfigResult[]) {
  const out: Record<
    string,
    { configs: number; below1: number; min: number; stepsAboveSpreadMin: number; maxAbsAt1: number; maxAbsMin: number }
  > = {}
  for (const r of rs) {
    const m = (out[`${r.mode}@${r.size}`] ??= {
      configs: 0,
      below1: 0,
      min: 1,
      stepsAboveSpreadMin: 1,
      maxAbsAt1: 0,
      maxAbsMin: 1
    })
    m.configs++
    if (r.auroc < 1) m.below1++
    m.min = round(Math.min(m.min, r.auroc))
    m.stepsAboveSpreadMin = round(Math.min(m.stepsAboveSpreadMin, r.stepsAboveSpread))
    if (r.aurocMaxAbs === 1) m.maxAbsAt1++
    m.maxAbsMin = round(Math.min(m.maxAbsMin, r.aurocMaxAbs))
  }
  return out
}

/** A short markdown table of the summary (for the README). */
export function markdownTable(s: ReturnType<typeof summarize>): string {
  const lines = [
    `Command: \`${s.command}\` (${s.configurations} configurations, ${s.seconds} s)`,
    '',
    '| metric | value |',
    '|---|---|',
    `| AUROC overall (pooled per-canary scores) | ${s.auroc.overall} |`,
    `| AUROC 1.0 where every tampered step exceeds the benign spread | ${s.auroc.aboveSpreadAt1} / ${s.auroc.aboveSpreadConfigs} (min ${s.auroc.aboveSpreadMin}) |`,
    `| AUROC 1.0 where the median tampered step exceeds it | ${s.auroc.medianAboveSpread.at1} / ${s.auroc.medianAboveSpread.configs} (min ${s.auroc.medianAboveSpread.min}) |`,
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
  lines.push('', '| mode | smallest detectable size f32 / f16 / q8_0 wire |', '|---|---|')
  for (const [m, w] of Object.entries(s.smallestDetectableSize))
    lines.push(`| ${m} | ${w.f32 ?? '–'} / ${w.f16 ?? '–'} / ${w.q8_0 ?? '–'} |`)
  return lines.join('\n')
}

type OverheadResult = { canaryStepsPerHopPerToken: number; extraWork: number; abCost: number } & Record<string, unknown>
