/**
 * Reading a node process's `--metrics` endpoint (node/daemon/metrics.ts): what the churn soak and the
 * load test check on real node processes (issue #17: no session or KV byte leaks, the session
 * cap holds).
 */
import type { AbortOptions } from '@libp2p/interface'
import { MetricsUnavailableError } from '../errors.js'
import type { LocalNode } from './local-swarm.js'

/** What a node holds now, as its Prometheus text says. */
export interface NodeHoldings {
  readonly peerId: string
  /** Sessions the session manager has open (layerswarm_sessions_active). */
  readonly sessions: number
  /** KV positions reserved by those sessions (layerswarm_kv_cache_tokens{state="used"}). */
  readonly kvTokens: number
  /** KV caches the shard really holds, and their bytes (read when scraped). */
  readonly kvCaches: number
  readonly kvBytes: number
  /** Resident set of the node process. */
  readonly rssMiB: number
}

/** The metrics URL a node logged at start (`node start --metrics HOST:PORT`). */
export function metricsUrl(node: LocalNode): string {
  const line = node.logs.find((l) => l.includes('"msg":"metrics"'))
  if (line === undefined) throw new MetricsUnavailableError(`node ${node.peerId} serves no metrics (start it with --metrics)`)
  return (JSON.parse(line) as { url: string }).url
}

/**
 * The value of the first sample whose line matches `name` and, if given, carries `label`
 * (e.g. `state="used"`); 0 when there is none (a gauge never set has no line: nothing held).
 */
export function sampleValue(text: string, name: string, label?: string): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue
    const rest = line.slice(name.length)
    if (rest[0] !== ' ' && rest[0] !== '{') continue
    if (label !== undefined && !rest.includes(label)) continue
    return Number(line.split(' ').at(-1))
  }
  return 0
}

/** Scrape attempts: a kept-alive socket the node's HTTP server closed as it was reused fails a fetch. */
const SCRAPE_ATTEMPTS = 3

async function scrape(url: string, { signal }: AbortOptions = {}): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted()
    try {
      return await (await fetch(url, { signal })).text()
    } catch (err) {
      if (attempt >= SCRAPE_ATTEMPTS) throw err
      await new Promise((r) => setTimeout(r, 100 * attempt))
    }
  }
}

/**
 * Scrapes a node's metrics. `url` defaults to the one the node logged; pass it explicitly for a
 * node whose early log lines were dropped.
 */
export async function readNodeHoldings(
  node: LocalNode,
  options: AbortOptions & { readonly url?: string } = {}
): Promise<NodeHoldings> {
  const text = await scrape(options.url ?? metricsUrl(node), options)
  return {
    peerId: node.peerId,
    sessions: sampleValue(text, 'layerswarm_sessions_active'),
    kvTokens: sampleValue(text, 'layerswarm_kv_cache_tokens', 'state="used"'),
    kvCaches: sampleValue(text, 'layerswarm_kv_caches'),
    kvBytes: sampleValue(text, 'layerswarm_kv_cache_bytes'),
    // prom-client default metrics under our prefix
    rssMiB: Math.round(sampleValue(text, 'layerswarm_process_process_resident_memory_bytes') / 2 ** 20)
  }
}
