import type { SpeculationStats, VerificationReport } from '../../client/index.js'

/** The `layerswarm` field of every response: how the tokens were made and what was checked. */
export interface ReportJson {
  readonly model_id: string
  /** The route of the last attempt, as "peer [start, end)" hops. */
  readonly route: Array<{ peer_id: string; start: number; end: number }>
  readonly report: unknown
  readonly convicted: string[]
  readonly timing: { total_ms: number; tokens_per_second: number }
  /** The request's speculative steps: the drafter (`draft` for the gateway's draft model) and its counts. */
  readonly speculation?: { mode: string; steps: number; drafted: number; accepted: number }
}

/**
 * JSON has no bytes or bigints: receipts' hashes and signatures, and any typed array (evidence
 * tensors: little-endian f32 bytes), go out as hex (docs/verification.md).
 */
export function jsonSafe(v: unknown): unknown {
  if (ArrayBuffer.isView(v)) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')
  if (typeof v === 'bigint') return v.toString()
  if (typeof v === 'number' && !Number.isFinite(v)) return null
  if (Array.isArray(v)) return v.map(jsonSafe)
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), jsonSafe(x)]))
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, jsonSafe(x)]))
  return v
}

export function reportJson(
  modelId: string,
  report: VerificationReport,
  convicted: string[],
  ms: number,
  tokens: number,
  speculation?: { readonly mode: string; readonly stats: SpeculationStats }
): ReportJson {
  const last = report.routes[report.routes.length - 1] ?? []
  return {
    model_id: modelId,
    route: last.map((h) => ({ peer_id: h.peerId, start: h.start, end: h.end })),
    report: jsonSafe(report),
    convicted,
    timing: { total_ms: Math.round(ms), tokens_per_second: ms > 0 ? Math.round((tokens * 1e5) / ms) / 100 : 0 },
    ...(speculation
      ? {
          speculation: {
            mode: speculation.mode,
            steps: speculation.stats.steps,
            drafted: speculation.stats.drafted,
            accepted: speculation.stats.accepted
          }
        }
      : {})
  }
}

// Header values must be ASCII.
const short = (id: string): string => (id.length > 12 ? `..${id.slice(-8)}` : id)

/**
 * One-line summary for the `X-Layerswarm-Verification` header, e.g.
 * `route=..a1b2c3d4[1,3)>..e5f6a7b8[3,4); receipts=12/12; canaries=2 peers, max posterior 0.010; failovers=0; excluded=0`.
 */
export function reportHeader(report: VerificationReport): string {
  const last = report.routes[report.routes.length - 1] ?? []
  const route = last.map((h) => `${short(h.peerId)}[${h.start},${h.end})`).join('>') || 'none'
  const ok = report.receipts.checked - report.receipts.invalid
  const maxPost = report.canaries.reduce((m, c) => Math.max(m, c.posterior), 0)
  const canaries =
    report.canaries.length > 0 ? `${report.canaries.length} peers, max posterior ${maxPost.toFixed(3)}` : 'none yet'
  return `route=${route}; receipts=${ok}/${report.receipts.checked}; canaries=${canaries}; failovers=${report.failovers}; excluded=${report.excludedPeers.length}`
}
