/**
 * Load benchmark (issue #18): `npm run bench -- load --model FILE|SHAPE --peers 3 --clients 16
 * [--gen-tokens 32] [--prompt-tokens 8] [--forwarding chain|relay] [--kernels auto] [--threads N]
 * [--node-threads N] [--dtype q8_0] [--seed 1] [--max-queued-steps N] [--batch-wait-ms MS]
 * [--warmup-tokens 16] [--edge-first 1] [--edge-last 1] [--client-mode process|shared]
 * [--speculate off|ngram|self|draft:F]`.
 *
 * Starts N real node processes on 127.0.0.1 splitting the remote blocks evenly, then runs one
 * client alone and then `--clients` clients at once through the same swarm (greedy decoding, each
 * its own prompt) and prints one JSON object: aggregate decode tokens/s of the crowd, one client's
 * tokens/s alone, p50/p99 time per token over every client's tokens, BUSY answers and failed
 * clients, and how many clients got exactly the tokens they get alone. Each client runs in its own
 * process by default (`--client-mode process`, bench/load-clients.ts), as on a real swarm each
 * client computes its edge work (embeddings, edge blocks, LM head) on its own machine; `shared`
 * runs them all in this process on one kernel set (one event loop caps the aggregate). On a host
 * with fewer cores than processes, clients and nodes still share the cores. Targets are
 * reported, not asserted. `spanBatch` is the first node's span run in this process for as many
 * sessions as clients, one by one and batched (bench/load-span.ts): what batching gives a node
 * once it is the bottleneck, which the crowd above reaches only when the clients' own work is
 * not (`nodeBatches` says how many sessions the nodes' batches held).
 */
import { availableParallelism } from 'node:os'
import { type Forwarding, parseSpeculate, type SpeculateMode } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { type Kernels, openModelFile, selectKernels } from '../shards/index.js'
import { type ClientRun, type LoadClients, processClients, sharedClients } from './load-clients.js'
import { spanBatchBench } from './load-span.js'
import { benchArgs, FORWARDINGS, SWARM_DEFAULTS, type SwarmBenchBase, swarmBenchBase } from './options.js'
import { evenSpans, promptText, resolveModel } from './swarm-setup.js'
import { decodeRate } from './swarm-single.js'
import { round } from './swarm-stats.js'

export interface LoadBenchOptions extends SwarmBenchBase {
  readonly clients: number
  readonly forwarding: Forwarding
  readonly nodeThreads: number
  readonly maxQueuedSteps?: number
  readonly batchWaitMs?: number
  /** Each client in its own process (default), or all in this one. */
  readonly clientMode: 'process' | 'shared'
  /** Speculative steps of every client (default off: one token per step, so time per token is a step's). */
  readonly speculate: SpeculateMode
}

function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}

/** A node's batched forwards so far and their mean sessions, from its Prometheus metrics. */
async function batchStats(node: LocalNode): Promise<{ batches: number; meanSessions: number } | null> {
  const line = node.logs.find((l) => l.includes('"msg":"metrics"'))
  if (!line) return null
  const { url } = JSON.parse(line) as { url: string }
  const text = await (await fetch(url)).text()
  const value = (name: string): number =>
    Number(
      text
        .split('\n')
        .find((l) => l.startsWith(name))
        ?.split(' ')
        .at(-1)
    )
  const batches = value('layerswarm_batch_sessions_count')
  return { batches, meanSessions: round(value('layerswarm_batch_sessions_sum') / batches, 2) }
}

export async function runLoadBench(o: LoadBenchOptions): Promise<Record<string, unknown>> {
  const { path, shape } = resolveModel(o)
  const model = openModelFile(path)
  const c = model.config
  // each client its own prompt: sessions at different positions, as real traffic is
  const prompts = Array.from({ length: o.clients }, (_, i) => promptText(model, o.promptTokens + (i % 4)))
  const spans = evenSpans(o.edgeFirst, c.nLayers - o.edgeLast, o.peers)
  // the first node's span alone in this process: what batching gives a node that is the bottleneck
  const spanKernels = selectKernels({ kind: o.kernels, threads: o.nodeThreads })
  const spanBatch = spanBatchBench(model, spanKernels, spans[0], o.clients)
  spanKernels.close?.()
  model.close()
  const maxTokens = Math.min(o.genTokens, c.seqLen - o.promptTokens - 8)
  const args = ['--kernels', o.kernels, '--threads', String(o.nodeThreads), '--max-sessions', String(Math.max(16, o.clients * 2))]
  args.push('--metrics', '127.0.0.1:0')
  if (o.maxQueuedSteps !== undefined) args.push('--max-queued-steps', String(o.maxQueuedSteps))
  if (o.batchWaitMs !== undefined) args.push('--batch-wait-ms', String(o.batchWaitMs))
  const nodes: LocalNode[] = []
  const kernels: Kernels | undefined =
    o.clientMode === 'shared' ? selectKernels({ kind: o.kernels, threads: o.threads }) : undefined
  let clients: LoadClients | undefined
  try {
    nodes.push(await startLocalNode({ model: path, layers: `${spans[0][0]}:${spans[0][1]}`, args, startTimeoutMs: 600_000 }))
    for (const [a, b] of spans.slice(1)) {
      nodes.push(await startLocalNode({ model: path, layers: `${a}:${b}`, bootstrap: [nodes[0].addrs[0]], args }))
    }
    const config = {
      bootstrap: nodes.map((n) => n.addrs[0]),
      model: path,
      forwarding: o.forwarding,
      edgeFirst: o.edgeFirst,
      edgeLast: o.edgeLast,
      kernels: o.kernels,
      threads: o.threads,
      maxTokens,
      warmupTokens: o.warmupTokens,
      speculate: o.speculate
    }
    clients = o.clientMode === 'shared' ? await sharedClients(config, prompts, kernels!) : await processClients(config, prompts)
    const crowdOf = clients
    // one client alone: its tokens/s, and the tokens every client must get in the crowd too
    const alone: ClientRun[] = []
    for (let i = 0; i < o.clients; i++) alone.push(await crowdOf.run(i))
    const aloneRate = decodeRate(alone[0].times)
    const aloneStepMs = alone[0].times.slice(1).map((t, i) => t - alone[0].times[i])
    const t0 = performance.now()
    const crowd = await Promise.all(prompts.map((_, i) => crowdOf.run(i)))
    const wallMs = performance.now() - t0
    const gaps = crowd.flatMap((r) => r.times.slice(1).map((t, i) => t - r.times[i]))
    const decoded = crowd.reduce((n, r) => n + Math.max(0, r.times.length - 1), 0)
    const firsts = crowd.filter((r) => r.times.length > 0).map((r) => r.times[0])
    const lasts = crowd.filter((r) => r.times.length > 0).map((r) => r.times[r.times.length - 1])
    const decodeWindowMs = Math.max(...lasts) - Math.min(...firsts)
    const aggregate = (decoded * 1000) / decodeWindowMs
    const batching = await Promise.all(nodes.map(batchStats))
    const p50 = percentile(gaps, 50)
    const p99 = percentile(gaps, 99)
    const same = crowd.filter((r, i) => r.error === undefined && r.tokens.join() === alone[i].tokens.join()).length
    return {
      bench: 'load',
      model: path,
      ...(shape ? { shape } : {}),
      config: { dim: c.dim, layers: c.nLayers, vocab: c.vocabSize },
      peers: o.peers,
      spans,
      clients: o.clients,
      forwarding: o.forwarding,
      kernels: kernels?.name ?? o.kernels,
      clientMode: o.clientMode,
      speculate: o.speculate,
      threads: o.threads,
      nodeThreads: o.nodeThreads,
      cores: availableParallelism(),
      genTokens: maxTokens,
      oneClient: { decodeTokensPerSecond: round(aloneRate, 2), p50TokenMs: round(percentile(aloneStepMs, 50)) },
      crowd: {
        aggregateDecodeTokensPerSecond: round(aggregate, 2),
        overOneClient: round(aggregate / aloneRate, 2),
        wallMs: round(wallMs),
        p50TokenMs: round(p50),
        p99TokenMs: round(p99),
        p99OverP50: round(p99 / p50, 2),
        busy: crowd.reduce((n, r) => n + r.busy, 0),
        failedClients: crowd.filter((r) => r.error !== undefined).length,
        errors: crowd.flatMap((r) => (r.error ? [r.error.slice(0, 200)] : [])),
        sameTokensAsAlone: same,
        // per node, over the whole run (warm-up and the lone client included): batched forwards and sessions per batch
        nodeBatches: batching
      },
      spanBatch,
      targets: { overOneClient: 5, p99OverP50: 3 }
    }
  } finally {
    await clients?.close()
    await Promise.all(nodes.map((n) => n.stop()))
    kernels?.close?.()
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, {
    ...SWARM_DEFAULTS,
    clients: '16',
    'gen-tokens': '32',
    'prompt-tokens': '8',
    forwarding: 'chain',
    threads: '1',
    'node-threads': '1',
    'max-queued-steps': undefined,
    'batch-wait-ms': undefined,
    'client-mode': 'process',
    speculate: 'off'
  })
  const result = await runLoadBench({
    ...swarmBenchBase(a, 1),
    clients: a.int('clients', 1),
    forwarding: a.oneOf('forwarding', FORWARDINGS),
    nodeThreads: a.int('node-threads', 1),
    maxQueuedSteps: a.optional('max-queued-steps', 1),
    batchWaitMs: a.optional('batch-wait-ms', 0),
    clientMode: a.oneOf('client-mode', ['process', 'shared'] as const),
    speculate: parseSpeculate(a.required('speculate', 'off|ngram|...'))
  })
  console.log(JSON.stringify(result, null, 2))
}
