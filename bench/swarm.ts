/**
 * Swarm benchmark: `npm run bench -- swarm --model FILE|SHAPE --peers N [--forwarding relay|chain|both]
 * [--gen-tokens 64] [--prompt-tokens 16] [--kernels auto|reference|wasm|native] [--threads N]
 * [--edge-first 1] [--edge-last 1] [--wire-dtype f32|f16|q8_0] [--dtype q8_0] [--seed 1]
 * [--busy-poll MS[,MS...]] [--node-threads N] [--repeats N] [--warmup-tokens 256]`.
 *
 * Starts N real node processes on 127.0.0.1 splitting the remote blocks evenly, generates
 * greedily through them with the SDK, and prints one JSON object: decode tokens/s through the
 * swarm next to the same model in this one process (same kernels, same prompt, same run), the
 * ratio, per-hop latency (from the client's `step` log events), bytes on the wire per token and
 * the route. A SHAPE (110m, 1.1b, ...) instead of a file writes a random-weight GGUF to /tmp
 * once and reuses it. The targets are reported, not asserted.
 *
 * `--busy-poll` lists polling windows to compare in one run (node/daemon/busy-poll.ts): for each, the
 * nodes start with `--busy-poll MS` and the client polls likewise while it streams; the first
 * value fills the top-level `relay`/`chain` results, every value is in `runs`. `--repeats N`
 * measures each mode N times, each right after a single-process run (the model stays loaded
 * here), and reports medians: the ratio is the median of those adjacent pairs.
 */
import type { Forwarding } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { createBusyPoller } from '../node/daemon/busy-poll.js'
import { type DType, encodeTensor } from '../protocol/index.js'
import { openModelFile } from '../shards/index.js'
import { benchArgs, FORWARDINGS, SWARM_DEFAULTS, type SwarmBenchBase, swarmBenchBase, TENSOR_DTYPES } from './options.js'
import { rawTcpRoundTrip } from './swarm-floor.js'
import { evenSpans, promptText, resolveModel, swarmBenchClient } from './swarm-setup.js'
import { decodeRate, openSingleProcess, type SingleRun } from './swarm-single.js'
import { headline, hopLatency, knownShape, median, round, type StepEvent, wireBytesPerToken } from './swarm-stats.js'

export interface SwarmBenchOptions extends Omit<SwarmBenchBase, 'warmupTokens'> {
  readonly forwarding: Forwarding[]
  /** Kernel threads of each node process (default: `threads`, as a peer on its own machine runs). */
  readonly nodeThreads?: number
  readonly wireDtype: DType
  /** Polling windows (ms) to compare, each a fresh set of nodes (default [0]: off). */
  readonly busyPollMs?: number[]
  /** Measurements per mode, each right after one of the single process (medians reported; default 1). */
  readonly repeats?: number
  /**
   * Tokens generated through the swarm before each measurement (default 256). A node daemon
   * serves for hours; V8 needs about a thousand messages before the libp2p stack (Noise, yamux,
   * framing) runs optimized code (a cold loopback round trip is ~0.6 ms, a warm one ~0.17 ms).
   */
  readonly warmupTokens?: number
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
  const { client, close } = await swarmBenchClient('swarm', path, nodes, o, {
    forwarding,
    wireDtype: o.wireDtype,
    onEvent: (e) => {
      if (recording && e.event === 'step') steps.push(e as unknown as StepEvent)
    }
  })
  try {
    // routes, streams, and JIT on both ends (steady state, as a long-running daemon is)
    await client.generate(prompt, { maxTokens: Math.max(4, o.warmupTokens ?? 256), temperature: 0 })
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
    await close()
  }
}

type ModeResult = Awaited<ReturnType<typeof throughSwarm>>

/**
 * One mode's measurements, each paired with the single-process run just before it: the ratio is
 * the median of the per-pair ratios; latency is that of the run with the median ratio.
 */
function summarize(pairs: Array<{ swarm: ModeResult; single: SingleRun }>) {
  const ratios = pairs.map((p) => p.swarm.decodeTokensPerSecond / p.single.decodeTokensPerSecond)
  const mid = pairs[ratios.indexOf(median(ratios))]
  return {
    decodeTokensPerSecond: round(median(pairs.map((p) => p.swarm.decodeTokensPerSecond)), 2),
    singleProcessTokensPerSecond: round(median(pairs.map((p) => p.single.decodeTokensPerSecond)), 2),
    ratioToSingleProcess: round(median(ratios)),
    ratios: ratios.map((r) => round(r)),
    sameTokensAsSingleProcess: pairs.every(
      (p) => p.swarm.tokens.length === p.single.tokens.length && p.swarm.tokens.every((t, i) => t === p.single.tokens[i])
    ),
    prefillMs: mid.swarm.prefillMs,
    route: mid.swarm.route,
    failovers: pairs.reduce((a, p) => a + p.swarm.failovers, 0),
    latency: mid.swarm.latency,
    wireBytesPerToken: mid.swarm.wireBytesPerToken
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
  const repeats = o.repeats ?? 1
  const single = await openSingleProcess(path, o, prompt)
  const singles: SingleRun[] = []
  const nodeThreads = o.nodeThreads ?? o.threads
  const busyPoll = o.busyPollMs ?? [0]
  const named = shape ?? knownShape(c)
  const result: Record<string, unknown> = {
    bench: 'swarm',
    model: path,
    ...(named ? { shape: named } : {}),
    config: { dim: c.dim, layers: c.nLayers, vocab: c.vocabSize, weights: weightDType },
    kernels: single.kernels,
    threads: o.threads,
    nodeThreads,
    busyPollMs: busyPoll[0],
    repeats,
    warmupTokens: Math.min(o.warmupTokens ?? 256, c.seqLen - o.promptTokens - 1),
    peers: o.peers,
    spans,
    edge: { first: o.edgeFirst, last: o.edgeLast },
    wireDtype: o.wireDtype,
    promptTokens: single.promptTokens
  }
  const runs: Array<Record<string, unknown>> = []
  try {
    for (const busyPollMs of busyPoll) {
      const run: Record<string, unknown> = { busyPollMs }
      // The client bootstraps to every node and reads their spans by `info`: announcements are not
      // needed to route, and each one is a signed gossipsub round that every peer checks — CPU the
      // computing peer needs on a shared host. Nodes announce at their default interval.
      const args = ['--kernels', o.kernels, '--threads', String(nodeThreads), '--busy-poll', String(busyPollMs)]
      const nodes: LocalNode[] = []
      const pairs = new Map<Forwarding, Array<{ swarm: ModeResult; single: SingleRun }>>()
      const chainOverRelay: number[] = []
      try {
        const startTimeoutMs = 600_000 // a 1.1b span takes a while to read
        nodes.push(await startLocalNode({ model: path, layers: `${spans[0][0]}:${spans[0][1]}`, args, startTimeoutMs }))
        const bootstrap = [nodes[0].addrs[0]]
        for (const [a, b] of spans.slice(1))
          nodes.push(await startLocalNode({ model: path, layers: `${a}:${b}`, bootstrap, args, startTimeoutMs }))
        for (let rep = 0; rep < repeats; rep++) {
          const rates = new Map<Forwarding, number>()
          for (const mode of o.forwarding) {
            // the single process right before: the same neighbours' load on both sides of the ratio
            const s = await single.run(maxTokens)
            singles.push(s)
            const r = await throughSwarm(
              path,
              c.dim,
              { ...o, genTokens: maxTokens, warmupTokens: result.warmupTokens as number },
              nodes,
              mode,
              prompt,
              busyPollMs
            )
            pairs.set(mode, [...(pairs.get(mode) ?? []), { swarm: r, single: s }])
            rates.set(mode, r.decodeTokensPerSecond)
          }
          if (rates.has('relay') && rates.has('chain')) chainOverRelay.push(rates.get('chain')! / rates.get('relay')!)
        }
      } finally {
        await Promise.all(nodes.map((n) => n.stop()))
      }
      for (const [mode, p] of pairs) run[mode] = summarize(p)
      if (chainOverRelay.length > 0) {
        run.chainOverRelay = round(median(chainOverRelay))
        run.chainOverRelayPerRepeat = chainOverRelay.map((x) => round(x))
      }
      runs.push(run)
    }
  } finally {
    single.close()
  }
  // what the wire itself costs here, for reading linkMs (README "Swarm speed")
  result.rawTcpRoundTripMs = await rawTcpRoundTrip(encodeTensor(new Float32Array(c.dim), [1, c.dim], o.wireDtype).data.byteLength)
  result.genTokens = singles[0].tokens.length
  result.singleProcess = {
    decodeTokensPerSecond: round(median(singles.map((s) => s.decodeTokensPerSecond)), 2),
    runs: singles.map((s) => round(s.decodeTokensPerSecond, 2)),
    prefillMs: round(median(singles.map((s) => s.prefillMs)))
  }
  const { busyPollMs: _, ...first } = runs[0]
  Object.assign(result, first)
  if (runs.length > 1)
    result.runs = runs.map((r) => ({
      busyPollMs: r.busyPollMs,
      relay: headline(r.relay),
      chain: headline(r.chain),
      chainOverRelay: r.chainOverRelay
    }))
  // the targets (127.0.0.1, 3 spans): 1.1b >= 0.95x, 110m >= 0.85x of one process; chain > relay from 3 hops
  result.targets = { ratio: named === '1.1b' ? 0.95 : named === '110m' ? 0.85 : null, chainBeatsRelayFromHops: 3 }
  return result
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, {
    ...SWARM_DEFAULTS,
    forwarding: 'both',
    'node-threads': undefined,
    'wire-dtype': 'f32',
    'busy-poll': '0',
    repeats: '1',
    'warmup-tokens': '256'
  })
  const forwarding = a.oneOf('forwarding', [...FORWARDINGS, 'both'] as const)
  const result = await runSwarmBench({
    ...swarmBenchBase(a),
    forwarding: forwarding === 'both' ? ['relay', 'chain'] : [forwarding],
    nodeThreads: a.optional('node-threads', 1),
    wireDtype: a.oneOf('wire-dtype', TENSOR_DTYPES),
    busyPollMs: a.intList('busy-poll', 0),
    repeats: a.int('repeats', 1)
  })
  console.log(JSON.stringify(result, null, 2))
}
