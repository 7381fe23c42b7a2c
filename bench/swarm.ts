/**
 * Swarm benchmark: `npm run bench -- swarm --model FILE|SHAPE --peers N [--forwarding relay|chain|both]
 * [--gen-tokens 64] [--prompt-tokens 16] [--kernels auto|reference|wasm|native] [--threads N]
 * [--edge-first 1] [--edge-last 1] [--wire-dtype f32|f16|q8_0] [--dtype q8_0] [--seed 1]
 * [--busy-poll MS[,MS...]] [--node-threads N]`.
 *
 * Starts N real node processes on 127.0.0.1 splitting the remote blocks evenly, generates
 * greedily through them with the SDK, and prints one JSON object: decode tokens/s through the
 * swarm next to the same model in this one process (same kernels, same prompt, same run), the
 * ratio, per-hop latency (from the client's `step` log events), bytes on the wire per token and
 * the route. A SHAPE (110m, 1.1b, ...) instead of a file writes a random-weight GGUF to /tmp
 * once and reuses it. The targets are reported, not asserted.
 *
 * `--busy-poll` lists polling windows to compare in one run (node/busy-poll.ts): for each, the
 * nodes start with `--busy-poll MS` and the client polls likewise while it streams; the first
 * value fills the top-level `relay`/`chain` results, every value is in `runs`.
 */
import { existsSync, renameSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { createClient, type Forwarding } from '../client/index.js'
import { createBusyPoller } from '../node/busy-poll.js'
import { type LocalNode, startLocalNode } from '../node/local-swarm.js'
import type { DType } from '../protocol/index.js'
import {
  createEdge,
  createLocalPipeline,
  createShard,
  createTokenizer,
  generateTokens,
  type KernelKind,
  type ModelFile,
  openModelFile,
  parseShape,
  selectKernels,
  writeRandomModel
} from '../shards/index.js'
import { hopLatency, median, round, type StepEvent, wireBytesPerToken } from './swarm-stats.js'

export interface SwarmBenchOptions {
  readonly model: string
  readonly peers: number
  readonly forwarding: Forwarding[]
  readonly genTokens: number
  readonly promptTokens: number
  readonly kernels: KernelKind
  readonly threads: number
  /** Kernel threads of each node process (default: `threads`, as a peer on its own machine runs). */
  readonly nodeThreads?: number
  readonly edgeFirst: number
  readonly edgeLast: number
  readonly wireDtype: DType
  /** Weight dtype and seed of a generated model (when `model` is a shape). */
  readonly dtype: 'f32' | 'f16' | 'q8_0'
  readonly seed: number
  /** Polling windows (ms) to compare, each a fresh set of nodes (default [0]: off). */
  readonly busyPollMs?: number[]
}

/** A model file path, writing a random-weight GGUF for a shape name once. */
function resolveModel(o: SwarmBenchOptions): { path: string; shape?: string } {
  if (existsSync(o.model)) return { path: o.model }
  const shape = parseShape(o.model)
  const path = join(tmpdir(), `layerswarm-bench-${shape.name}-${o.dtype}-s${o.seed}.gguf`)
  if (!existsSync(path)) {
    process.stderr.write(`bench swarm: writing ${path}\n`)
    writeRandomModel(`${path}.part`, shape, { dtype: o.dtype, seed: o.seed })
    renameSync(`${path}.part`, path) // only once complete, so an interrupted write is never reused
  }
  return { path, shape: shape.name }
}

/** [start, end) spans of `peers` nearly equal parts of blocks [from, to). */
export function evenSpans(from: number, to: number, peers: number): Array<[number, number]> {
  const n = to - from
  if (peers < 1 || peers > n) throw new Error(`bench swarm: ${peers} peers cannot split ${n} remote blocks`)
  return Array.from({ length: peers }, (_, i) => [from + Math.floor((i * n) / peers), from + Math.floor(((i + 1) * n) / peers)])
}

/** A prompt text that encodes to `n` tokens: pieces spread over the vocabulary, each kept if it adds exactly one. */
function promptText(model: ModelFile, n: number): string {
  const tokenizer = createTokenizer(model.vocabulary!)
  const v = model.config.vocabSize
  const count = (text: string): number => tokenizer.encode(text).length
  const base = count('')
  let text = ''
  for (let i = 0; count(text) - base < n && i < 100 * n; i++) {
    const next = text + tokenizer.decode([3 + ((i * 7919) % (v - 3))])
    if (count(next) === count(text) + 1) text = next
  }
  return text
}

/** Decode tokens/s from the times tokens were yielded: the first one ends the prefill. */
function decodeRate(times: number[]): number {
  return times.length < 2 ? Number.NaN : ((times.length - 1) * 1000) / (times[times.length - 1] - times[0])
}

async function singleProcess(path: string, o: SwarmBenchOptions, prompt: string, maxTokens: number) {
  const model = openModelFile(path)
  const kernels = selectKernels({ kind: o.kernels, threads: o.threads })
  try {
    const edge = createEdge({ model, kernels })
    const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels })
    const tokenizer = createTokenizer(model.vocabulary!)
    const promptTokens = tokenizer.encode(prompt)
    const run = async (id: string, n: number) => {
      const pipeline = createLocalPipeline([shard], id, promptTokens.length + n)
      const tokens: number[] = []
      const times: number[] = []
      const t0 = performance.now()
      for await (const t of generateTokens({
        edge,
        pipeline,
        promptTokens,
        maxTokens: n,
        temperature: 0,
        stopIds: tokenizer.stopIds
      })) {
        tokens.push(t)
        times.push(performance.now())
      }
      await pipeline.close()
      return { tokens, prefillMs: times[0] - t0, decodeTokensPerSecond: decodeRate(times) }
    }
    await run('warm-up', 4) // JIT and scratch buffers, as every swarm peer warmed up at start
    return { kernels: kernels.name, promptTokens: promptTokens.length, ...(await run('measured', maxTokens)) }
  } finally {
    kernels.close?.()
    model.close()
  }
}

async function throughSwarm(
  path: string,
  dim: number,
  o: SwarmBenchOptions,
  nodes: LocalNode[],
  forwarding: Forwarding,
  prompt: string,
  busyPollMs: number
) {
  const steps: StepEvent[] = []
  // the client waits on the network for most of a token too: it polls like the nodes do
  const poller = createBusyPoller(busyPollMs)
  let recording = false
  const kernels = selectKernels({ kind: o.kernels, threads: o.threads })
  const client = await createClient({
    bootstrap: nodes.map((n) => n.addrs[0]),
    model: path,
    edgeFirst: o.edgeFirst,
    edgeLast: o.edgeLast,
    forwarding,
    wireDtype: o.wireDtype,
    kernels,
    routeTimeoutMs: 60_000,
    stepTimeoutMs: 120_000,
    // decode speed of the swarm path itself; the canary benchmark (bench/canary.ts) measures canaries
    canaries: false,
    log: (e) => {
      if (recording && e.event === 'step') steps.push(e as unknown as StepEvent)
      if (e.event === 'failover') process.stderr.write(`bench swarm: ${JSON.stringify(e)}\n`)
    }
  })
  try {
    await client.generate(prompt, { maxTokens: 4, temperature: 0 }) // routes, streams, JIT on both ends
    recording = true
    const times: number[] = []
    const t0 = performance.now()
    const it = client.stream(prompt, { maxTokens: o.genTokens, temperature: 0 })
    poller.touch()
    let r = await it.next()
    while (!r.done) {
      times.push(performance.now())
      poller.touch()
      r = await it.next()
    }
    poller.stop()
    const hops = r.value.report.routes[0].length
    const latency = hopLatency(steps, forwarding === 'chain')
    // a decoded token's wall time, and what of it the client spent itself (embed, edge blocks, head)
    const tokenMs = median(times.slice(1).map((t, i) => t - times[i]))
    return {
      tokens: r.value.tokens,
      decodeTokensPerSecond: decodeRate(times),
      prefillMs: round(times[0] - t0),
      route: r.value.report.routes[r.value.report.routes.length - 1],
      failovers: r.value.report.failovers,
      latency: { tokenMs: round(tokenMs), clientMs: round(tokenMs - latency.remoteStepMs), ...latency },
      wireBytesPerToken: wireBytesPerToken(dim, o.wireDtype, hops, forwarding === 'chain', nodes[0].peerId)
    }
  } finally {
    await client.close()
    kernels.close?.()
  }
}

export async function runSwarmBench(o: SwarmBenchOptions): Promise<Record<string, unknown>> {
  const { path, shape } = resolveModel(o)
  const model = openModelFile(path)
  const c = model.config
  const weightDType = model.weightDType
  const prompt = promptText(model, o.promptTokens)
  model.close()
  const spans = evenSpans(o.edgeFirst, c.nLayers - o.edgeLast, o.peers)
  const maxTokens = Math.min(o.genTokens, c.seqLen - o.promptTokens - 1)
  const single = await singleProcess(path, { ...o, genTokens: maxTokens }, prompt, maxTokens)
  const nodeThreads = o.nodeThreads ?? o.threads
  const busyPoll = o.busyPollMs ?? [0]
  const result: Record<string, unknown> = {
    bench: 'swarm',
    model: path,
    ...(shape ? { shape } : {}),
    config: { dim: c.dim, layers: c.nLayers, vocab: c.vocabSize, weights: weightDType },
    kernels: single.kernels,
    threads: o.threads,
    nodeThreads,
    busyPollMs: busyPoll[0],
    peers: o.peers,
    spans,
    edge: { first: o.edgeFirst, last: o.edgeLast },
    wireDtype: o.wireDtype,
    promptTokens: single.promptTokens,
    genTokens: single.tokens.length,
    singleProcess: { decodeTokensPerSecond: round(single.decodeTokensPerSecond, 2), prefillMs: round(single.prefillMs) }
  }
  const runs: Array<Record<string, unknown>> = []
  for (const busyPollMs of busyPoll) {
    const run: Record<string, unknown> = { busyPollMs }
    // The client bootstraps to every node and reads their spans by `info`: announcements are not
    // needed to route, and each one is a signed gossipsub round that every peer checks — CPU the
    // computing peer needs on a shared host. Nodes announce at their default interval.
    const args = ['--kernels', o.kernels, '--threads', String(nodeThreads), '--busy-poll', String(busyPollMs)]
    const nodes: LocalNode[] = []
    try {
      const startTimeoutMs = 600_000 // a 1.1b span takes a while to read
      nodes.push(await startLocalNode({ model: path, layers: `${spans[0][0]}:${spans[0][1]}`, args, startTimeoutMs }))
      const bootstrap = [nodes[0].addrs[0]]
      for (const [a, b] of spans.slice(1))
        nodes.push(await startLocalNode({ model: path, layers: `${a}:${b}`, bootstrap, args, startTimeoutMs }))
      for (const mode of o.forwarding) {
        const r = await throughSwarm(path, c.dim, { ...o, genTokens: maxTokens }, nodes, mode, prompt, busyPollMs)
        run[mode] = {
          decodeTokensPerSecond: round(r.decodeTokensPerSecond, 2),
          ratioToSingleProcess: round(r.decodeTokensPerSecond / single.decodeTokensPerSecond),
          sameTokensAsSingleProcess: r.tokens.length === single.tokens.length && r.tokens.every((t, i) => t === single.tokens[i]),
          prefillMs: r.prefillMs,
          route: r.route,
          failovers: r.failovers,
          latency: r.latency,
          wireBytesPerToken: r.wireBytesPerToken
        }
      }
    } finally {
      await Promise.all(nodes.map((n) => n.stop()))
    }
    const rate = (m: Forwarding) => (run[m] as { decodeTokensPerSecond?: number } | undefined)?.decodeTokensPerSecond
    if (rate('relay') !== undefined && rate('chain') !== undefined) run.chainOverRelay = round(rate('chain')! / rate('relay')!)
    runs.push(run)
  }
  const { busyPollMs: _, ...first } = runs[0]
  Object.assign(result, first)
  if (runs.length > 1) result.runs = runs.map((r) => ({ busyPollMs: r.busyPollMs, relay: headline(r.relay), chain: headline(r.chain), chainOverRelay: r.chainOverRelay }))
  // the targets (127.0.0.1, 3 spans): 1.1b >= 0.95x, 110m >= 0.85x of one process; chain > relay from 3 hops
  result.targets = { ratio: shape === '1.1b' ? 0.95 : shape === '110m' ? 0.85 : null, chainBeatsRelayFromHops: 3 }
  return result
}

/** The headline numbers of one mode's result, for the `runs` comparison. */
function headline(r: unknown): Record<string, unknown> | undefined {
  if (r === undefined) return undefined
  const m = r as { decodeTokensPerSecond: number; ratioToSingleProcess: number; sameTokensAsSingleProcess: boolean; latency: { tokenMs: number } }
  return { decodeTokensPerSecond: m.decodeTokensPerSecond, ratioToSingleProcess: m.ratioToSingleProcess, sameTokens: m.sameTokensAsSingleProcess, tokenMs: m.latency.tokenMs }
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      peers: { type: 'string', default: '3' },
      forwarding: { type: 'string', default: 'both' },
      'gen-tokens': { type: 'string', default: '64' },
      'prompt-tokens': { type: 'string', default: '16' },
      kernels: { type: 'string', default: 'auto' },
      threads: { type: 'string' },
      'node-threads': { type: 'string' },
      'edge-first': { type: 'string', default: '1' },
      'edge-last': { type: 'string', default: '1' },
      'wire-dtype': { type: 'string', default: 'f32' },
      dtype: { type: 'string', default: 'q8_0' },
      seed: { type: 'string', default: '1' },
      'busy-poll': { type: 'string', default: '0' }
    }
  })
  const int = (name: string, v: string | undefined, min: number): number => {
    const n = Number(v)
    if (!Number.isInteger(n) || n < min) throw new Error(`bench swarm: --${name} must be an integer >= ${min}`)
    return n
  }
  const oneOf = <T extends string>(name: string, v: string, allowed: readonly T[]): T => {
    if (!allowed.includes(v as T)) throw new Error(`bench swarm: --${name} ${allowed.join('|')}`)
    return v as T
  }
  if (!values.model) throw new Error('bench swarm: --model FILE or a shape (110m, 1.1b, ...) is required')
  const forwarding = oneOf('forwarding', values.forwarding, ['relay', 'chain', 'both'] as const)
  const result = await runSwarmBench({
    model: values.model,
    peers: int('peers', values.peers, 1),
    forwarding: forwarding === 'both' ? ['relay', 'chain'] : [forwarding],
    genTokens: int('gen-tokens', values['gen-tokens'], 2),
    promptTokens: int('prompt-tokens', values['prompt-tokens'], 1),
    kernels: oneOf('kernels', values.kernels, ['auto', 'reference', 'wasm', 'native'] as const),
    threads: values.threads === undefined ? availableParallelism() : int('threads', values.threads, 1),
    nodeThreads: values['node-threads'] === undefined ? undefined : int('node-threads', values['node-threads'], 1),
    edgeFirst: int('edge-first', values['edge-first'], 0),
    edgeLast: int('edge-last', values['edge-last'], 0),
    wireDtype: oneOf('wire-dtype', values['wire-dtype'], ['f32', 'f16', 'q8_0'] as const),
    dtype: oneOf('dtype', values.dtype, ['f32', 'f16', 'q8_0'] as const),
    seed: int('seed', values.seed, 0),
    busyPollMs: values['busy-poll'].split(',').map((v) => int('busy-poll', v, 0))
  })
  console.log(JSON.stringify(result, null, 2))
}
