import { createServer, type Server } from 'node:http'
import type { AbortOptions } from '@libp2p/interface'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import { parseHostPort } from '../config.js'
import { abortLinks } from './abort-links.js'
import { metricsHostAllowed } from './host-check.js'

/**
 * Prometheus metrics of a node or a gateway (prom-client). Each process owns one registry, so
 * tests can run several nodes in one process without their counters mixing.
 */
export class Metrics {
  readonly registry = new Registry()
  /** Tokens through this process: a node counts token positions its span computed, a gateway generated tokens. */
  readonly tokens: Counter<'phase'>
  /** One forward step of a session (a node: its span; a gateway: one generated token end to end). */
  readonly stepSeconds: Histogram<'phase'>
  readonly sessionsActive: Gauge
  readonly sessionsTotal: Counter
  /** KV cache token slots in use and free. */
  readonly kvCacheTokens: Gauge<'state'>
  /** Canary verdicts (gateway/client side: nodes cannot tell canaries from real steps, by design). */
  readonly canaryChecks: Counter<'verdict'>
  /** Errors by typed code (BUSY, BAD_SHAPE, NO_ROUTE, ...). */
  readonly errors: Counter<'code'>
  /** Payload bytes on the wire (libp2p streams for nodes, HTTP bodies for the gateway). */
  readonly wireBytes: Counter<'direction'>
  /** Sessions per batched forward over the span (node batching, issue #18). */
  readonly batchSessions: Histogram

  constructor(o: { role: 'node' | 'gateway'; defaultMetrics?: boolean; labels?: Record<string, string> }) {
    const r = [this.registry]
    this.registry.setDefaultLabels({ role: o.role, ...o.labels })
    if (o.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'layerswarm_process_' })
    this.tokens = new Counter({
      name: 'layerswarm_tokens_total',
      help: 'Token positions processed (prefill and decode)',
      labelNames: ['phase'],
      registers: r
    })
    this.stepSeconds = new Histogram({
      name: 'layerswarm_step_duration_seconds',
      help: 'Time of one forward step',
      labelNames: ['phase'],
      // 0.5 ms … 10 s: tiny models on loopback up to big spans over the internet.
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r
    })
    this.sessionsActive = new Gauge({ name: 'layerswarm_sessions_active', help: 'Sessions open now', registers: r })
    this.sessionsTotal = new Counter({ name: 'layerswarm_sessions_total', help: 'Sessions opened', registers: r })
    this.kvCacheTokens = new Gauge({
      name: 'layerswarm_kv_cache_tokens',
      help: 'KV cache token slots',
      labelNames: ['state'],
      registers: r
    })
    this.canaryChecks = new Counter({
      name: 'layerswarm_canary_checks_total',
      help: 'Canary checks by verdict',
      labelNames: ['verdict'],
      registers: r
    })
    this.errors = new Counter({ name: 'layerswarm_errors_total', help: 'Errors by code', labelNames: ['code'], registers: r })
    this.batchSessions = new Histogram({
      name: 'layerswarm_batch_sessions',
      help: 'Sessions whose steps ran in one batched forward',
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers: r
    })
    this.wireBytes = new Counter({
      name: 'layerswarm_wire_bytes_total',
      help: 'Bytes on the wire',
      labelNames: ['direction'],
      registers: r
    })
  }

  /**
   * What the span's shard itself holds, read when scraped: its KV caches and their bytes. The
   * session gauges above are set by the session manager; these count what was really allocated,
   * so a cache the manager forgot shows here (the churn soak's leak check, issue #17).
   */
  watchShard(shard: { readonly sessionCount: number; readonly kvBytesHeld: number }): void {
    new Gauge({
      name: 'layerswarm_kv_caches',
      help: 'KV caches the shard holds (one per open session)',
      registers: [this.registry],
      collect() {
        this.set(shard.sessionCount)
      }
    })
    new Gauge({
      name: 'layerswarm_kv_cache_bytes',
      help: 'Bytes of KV cache the shard holds',
      registers: [this.registry],
      collect() {
        this.set(shard.kvBytesHeld)
      }
    })
  }

  /**
   * The process's memory by kind (rss, heap_used, heap_total, external, array_buffers), read when
   * scraped. Under `node --expose-gc` (a debugging flag, never a default) each scrape first runs a
   * full collection and layerswarm_memory_after_gc is 1, so heap_used is the live heap: what the
   * fuzzer's checkpoints compare to tell a leak from heap sizing (issue #17).
   */
  watchMemory(): void {
    const gc = (globalThis as { gc?: () => void }).gc
    new Gauge({
      name: 'layerswarm_memory_after_gc',
      help: '1 if each scrape runs a full GC before reading memory (node --expose-gc)',
      registers: [this.registry],
      collect() {
        this.set(gc === undefined ? 0 : 1)
      }
    })
    new Gauge({
      name: 'layerswarm_memory_bytes',
      help: 'Process memory by kind (process.memoryUsage), after a full GC under --expose-gc',
      labelNames: ['kind'],
      registers: [this.registry],
      collect() {
        gc?.()
        const m = process.memoryUsage()
        this.set({ kind: 'rss' }, m.rss)
        this.set({ kind: 'heap_used' }, m.heapUsed)
        this.set({ kind: 'heap_total' }, m.heapTotal)
        this.set({ kind: 'external' }, m.external)
        this.set({ kind: 'array_buffers' }, m.arrayBuffers)
      }
    })
  }

  /**
   * What the node holds for its peers, read when scraped: entries on its stop signal (one per
   * pending read), peers with rate buckets, open streams, request bytes in flight. After traffic
   * ends each must come back down (the fuzz's leak check, issue #17).
   */
  watchRecords(o: {
    readonly stopSignal: AbortSignal
    readonly peerLimits: { readonly tracked: number }
    readonly host: { getConnections(): readonly { readonly streams: readonly unknown[] }[] }
    readonly budget: { readonly inFlight: number }
  }): void {
    new Gauge({
      name: 'layerswarm_node_records',
      help: 'Records the node holds for its peers by kind (stop-signal links, rate-limited peers, streams, bytes in flight)',
      labelNames: ['kind'],
      registers: [this.registry],
      collect() {
        this.set({ kind: 'stop_signal_links' }, abortLinks(o.stopSignal))
        this.set({ kind: 'rate_limited_peers' }, o.peerLimits.tracked)
        this.set(
          { kind: 'streams' },
          o.host.getConnections().reduce((n, c) => n + c.streams.length, 0)
        )
        this.set({ kind: 'bytes_in_flight' }, o.budget.inFlight)
      }
    })
  }

  /** One batched forward over the span ran `jobs` sessions' steps (`rows` rows in all). */
  batch(jobs: number, _rows: number): void {
    this.batchSessions.observe(jobs)
  }

  /** `positions` token positions went through a step that took `seconds`. */
  recordStep(phase: 'prefill' | 'decode', positions: number, seconds: number): void {
    this.tokens.inc({ phase }, positions)
    this.stepSeconds.observe({ phase }, seconds)
  }

  sessionOpened(): void {
    this.sessionsActive.inc()
    this.sessionsTotal.inc()
  }

  sessionClosed(): void {
    this.sessionsActive.dec()
  }

  /** Set the whole count at once (e.g. from the session manager after each change). */
  setSessions(active: number): void {
    this.sessionsActive.set(active)
  }

  /** Open sessions and KV slots as the session manager sees them now (also after idle sweeps). */
  sessionState(active: number, usedKv: number, freeKv: number): void {
    this.sessionsActive.set(active)
    this.kvCache(usedKv, freeKv)
  }

  kvCache(used: number, free: number): void {
    this.kvCacheTokens.set({ state: 'used' }, used)
    this.kvCacheTokens.set({ state: 'free' }, free)
  }

  canary(verdict: 'pass' | 'fail' | 'excluded', n = 1): void {
    this.canaryChecks.inc({ verdict }, n)
  }

  error(code: string): void {
    this.errors.inc({ code })
  }

  bytes(direction: 'in' | 'out', n: number): void {
    if (n > 0) this.wireBytes.inc({ direction }, n)
  }

  /** The Prometheus text exposition. */
  async text(): Promise<string> {
    return await this.registry.metrics()
  }
}

export interface MetricsServer {
  readonly url: string
  close(): Promise<void>
}

/**
 * `GET /metrics` on HOST:PORT (`--metrics`; a bare PORT is 127.0.0.1). Plain node:http: it must
 * work with nothing else running. A Host header that names another site is answered 403 (DNS
 * rebinding, issue #39; node/daemon/host-check.ts).
 */
export async function serveMetrics(listen: string, registry: Registry, { signal }: AbortOptions = {}): Promise<MetricsServer> {
  const { host, port } = parseHostPort(listen, '--metrics')
  signal?.throwIfAborted()
  const server: Server = createServer((req, res) => {
    if (!metricsHostAllowed(req.headers.host, host)) {
      res.writeHead(403, { 'content-type': 'text/plain' }).end("host not allowed: metrics answer to this machine's names\n")
      return
    }
    if (req.method !== 'GET' || (req.url ?? '/').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at /metrics\n')
      return
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`)
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  if (signal?.aborted) {
    await new Promise<void>((resolve) => server.close(() => resolve()))
    signal.throwIfAborted()
  }
  const addr = server.address()
  const bound = typeof addr === 'object' && addr ? addr.port : port
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
