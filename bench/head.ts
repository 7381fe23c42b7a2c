/**
 * The head on a peer against today's split (issue #35), with the edge-cloud paper's two measures:
 * `npm run bench -- head [--model FILE|SHAPE] [--peers 2] [--rtt-ms 25] [--gen-tokens 32]
 * [--prompt-tokens 16] [--threads 1] [--kernels auto] [--forwarding chain] [--warmup-tokens 4]`.
 *
 * Node processes on 127.0.0.1 serve blocks [1, n) of a Llama-3.2-1B-shaped model (dim 2048, 16
 * blocks, a 128,256-token tied head, q8_0 random weights, written once to the temp folder); every
 * process (nodes and this client) holds what it sends for RTT/2 (protocol/link-delay.ts). One run
 * generates greedily, in turn, with:
 * - local: today's split, the client runs block 0, block n−1 and the head (edgeLast 1);
 * - localHeadOnly: the client runs block 0 and the head only (edgeLast 0), to tell the head's
 *   share from the last block's;
 * - remote: `--head remote`, the last peer runs block n−1 and the head and answers a sealed top-k.
 * The client's kernels get `--threads` threads (1: an edge device). Per mode: ms per decode token
 * (median and mean), downlink bytes per decode token (the client's TCP bytes_received, from `ss`,
 * so Noise, yamux, protobuf, receipts and gossip are in; and the payload: hidden + sealed head),
 * and whether its tokens equal the local run's. It reports the reductions against the paper's
 * 46.1 % latency and 67.4 % downlink. Targets are reported, not asserted.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, renameSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { headAsk, lowDimensionalHead } from '../client/head/index.js'
import type { ClientInit, Forwarding } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { LINK_DELAY_ENV } from '../protocol/index.js'
import { createEdge, headTopK, openModelFile, parseShape, selectKernels, writeRandomModel } from '../shards/index.js'
import { benchArgs, FORWARDINGS, KERNEL_KINDS } from './options.js'
import { evenSpans, promptText, swarmBenchClient } from './swarm-setup.js'
import { median, round } from './swarm-stats.js'

/** The paper's reductions (edge-cloud seed paper, issue #35). */
const PAPER = { latencyReduction: 0.461, downlinkReduction: 0.674 }
const LLAMA_32_1B = '2048,16,32,8,8192,128256,tied'

/** The Llama-3.2-1B shape (the 8b shape's output scale, so logits spread as a trained model's). */
function headModel(spec: string): string {
  if (existsSync(spec)) return spec
  const path = join(tmpdir(), 'layerswarm-bench-head-llama3.2-1b-q8_0-s1.gguf')
  if (spec !== LLAMA_32_1B) throw new Error(`bench head: --model is a file or ${LLAMA_32_1B}`)
  if (!existsSync(path)) {
    process.stderr.write(`bench head: writing ${path}\n`)
    const shape = { ...parseShape(spec), name: 'llama3.2-1b', outputScale: 14 }
    writeRandomModel(`${path}.part`, shape, { dtype: 'q8_0', seed: 1, seqLen: 2048 })
    renameSync(`${path}.part`, path)
  }
  return path
}

/** TCP bytes this process has received, summed over its sockets (the kernel's tcp_info via `ss`). */
function tcpBytesReceived(): number {
  const text = execFileSync('ss', ['-tinpH'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  let total = 0
  for (const r of text.split(/\n(?=\S)/)) {
    if (!new RegExp(`pid=${process.pid}\\b`).test(r)) continue
    const got = /bytes_received:(\d+)/.exec(r)
    if (got) total += Number(got[1])
  }
  return total
}

interface HeadBenchOptions {
  readonly model: string
  readonly peers: number
  readonly rttMs: number
  readonly genTokens: number
  readonly promptTokens: number
  readonly threads: number
  readonly kernels: (typeof KERNEL_KINDS)[number]
  readonly forwarding: Forwarding
  readonly warmupTokens: number
}

type Mode = 'local' | 'localHeadOnly' | 'remote'
const MODES: Record<Mode, { edgeLast: number; head: ClientInit['head'] }> = {
  local: { edgeLast: 1, head: 'local' },
  localHeadOnly: { edgeLast: 0, head: 'local' },
  remote: { edgeLast: 0, head: 'remote' }
}

async function runMode(path: string, nodes: LocalNode[], o: HeadBenchOptions, prompt: string, mode: Mode) {
  const m = MODES[mode]
  const c =
    m.head === 'remote'
      ? await remoteClient(path, nodes, o)
      : await swarmBenchClient(
          'head',
          path,
          nodes,
          { kernels: o.kernels, threads: o.threads, edgeFirst: 1, edgeLast: m.edgeLast },
          { forwarding: o.forwarding, wireDtype: 'f32' }
        )
  try {
    if (o.warmupTokens > 0) await c.client.generate(prompt, { maxTokens: o.warmupTokens, temperature: 0 })
    const times: number[] = []
    let bytesAtFirst = 0
    const it = c.client.stream(prompt, { maxTokens: o.genTokens, temperature: 0 })
    let r = await it.next()
    while (!r.done) {
      times.push(performance.now())
      if (times.length === 1) bytesAtFirst = tcpBytesReceived()
      r = await it.next()
    }
    const downlink = tcpBytesReceived() - bytesAtFirst
    const gaps = times.slice(1).map((t, i) => t - times[i])
    const decodeTokens = Math.max(1, gaps.length)
    const head = r.value.head
    const dim = openDim(path)
    const hiddenBytes = mode === 'remote' ? (dim / 32) * 34 : dim * 4
    return {
      mode,
      edgeLast: m.edgeLast,
      head: m.head,
      tokens: r.value.tokens,
      msPerToken: { median: round(median(gaps), 2), mean: round(gaps.reduce((a, b) => a + b, 0) / decodeTokens, 2) },
      downlinkBytesPerToken: {
        tcp: Math.round(downlink / decodeTokens),
        payload: Math.round(hiddenBytes + (head ? head.headBytes / Math.max(1, head.steps) : 0))
      },
      ...(head ? { headStats: { ...head, sealedBytesPerStep: Math.round(head.headBytes / Math.max(1, head.steps)) } } : {})
    }
  } finally {
    await c.close()
  }
}

/**
 * Where a token's head time goes, in this process with no swarm: the full head (norm + 128k-row
 * matmul) on the client's threads and on every core (a peer's), the peer's top-k selection, and
 * the client's low-dimensional check (1024 secret + 64 context rows). Medians of 7.
 */
function headCompute(path: string, o: HeadBenchOptions): Record<string, number> {
  const model = openModelFile(path)
  const { dim } = model.config
  const hidden = Float32Array.from({ length: dim }, (_, i) => Math.sin(i * 1.7) * 2)
  const time = (fn: () => void): number => {
    const ms: number[] = []
    for (let i = 0; i < 8; i++) {
      const t = performance.now()
      fn()
      if (i > 0) ms.push(performance.now() - t) // the first call pays one-time preparation
    }
    return round(median(ms), 2)
  }
  const out: Record<string, number> = {}
  for (const [name, threads] of [
    ['fullHeadClientMs', o.threads],
    ['fullHeadAllCoresMs', availableParallelism()]
  ] as const) {
    const kernels = selectKernels({ kind: o.kernels, threads })
    const edge = createEdge({ model, kernels })
    out[name] = time(() => edge.lastLogits(hidden, 1))
    if (name === 'fullHeadAllCoresMs') {
      const logits = edge.lastLogits(hidden, 1)
      out.topKMs = time(() => headTopK(logits, headAsk({ temperature: 0 }, logits.length, false)))
    }
    kernels.close?.()
  }
  const rows = lowDimensionalHead(model)
  rows.add(Array.from({ length: 64 }, (_, i) => i * 1999))
  // as RemoteHead.check asks: σ only for the returned tokens (a greedy reply holds a few)
  const returned = new Set([0, 1999, 3998, 5997])
  out.checkRowsMs = time(() => rows.evaluate(hidden, 'q8_0', { above: Number.POSITIVE_INFINITY, ids: returned }))
  model.close()
  return out
}

function openDim(path: string): number {
  const model = openModelFile(path)
  const dim = model.config.dim
  model.close()
  return dim
}

async function remoteClient(path: string, nodes: LocalNode[], o: HeadBenchOptions) {
  const { createClient } = await import('../client/index.js')
  const { selectKernels } = await import('../shards/index.js')
  const kernels = selectKernels({ kind: o.kernels, threads: o.threads })
  const client = await createClient({
    bootstrap: nodes.map((n) => n.addrs[0]),
    model: path,
    edgeFirst: 1,
    edgeLast: 0,
    head: 'remote',
    forwarding: o.forwarding,
    wireDtype: 'f32',
    kernels,
    routeTimeoutMs: 60_000,
    stepTimeoutMs: 120_000,
    canaries: false
  })
  return {
    client,
    async close() {
      await client.close()
      kernels.close?.()
    }
  }
}

export async function runHeadBench(o: HeadBenchOptions): Promise<Record<string, unknown>> {
  const path = headModel(o.model)
  const model = openModelFile(path)
  const c = model.config
  const prompt = promptText(model, o.promptTokens)
  model.close()
  const spans = evenSpans(1, c.nLayers, o.peers)
  const env = { ...process.env, [LINK_DELAY_ENV]: String(o.rttMs / 2) }
  const before = process.env[LINK_DELAY_ENV]
  process.env[LINK_DELAY_ENV] = String(o.rttMs / 2) // the client's host delays what it sends too
  const nodes: LocalNode[] = []
  try {
    const args = ['--kernels', o.kernels, '--announce-interval', '30000']
    const startTimeoutMs = 600_000
    nodes.push(await startLocalNode({ model: path, layers: `${spans[0][0]}:${spans[0][1]}`, args, env, startTimeoutMs }))
    const bootstrap = [nodes[0].addrs[0]]
    for (const [a, b] of spans.slice(1))
      nodes.push(await startLocalNode({ model: path, layers: `${a}:${b}`, bootstrap, args, env, startTimeoutMs }))
    const runs = []
    for (const mode of ['local', 'localHeadOnly', 'remote'] as const) runs.push(await runMode(path, nodes, o, prompt, mode))
    const [local, headOnly, remote] = runs
    const same = (t: number[]) => t.length === local.tokens.length && t.every((x, i) => x === local.tokens[i])
    const reduction = (a: number, b: number) => round(1 - b / a, 3)
    return {
      bench: 'head',
      model: o.model === LLAMA_32_1B ? `random ${LLAMA_32_1B} (Llama-3.2-1B shape), q8_0` : o.model,
      dim: c.dim,
      vocab: c.vocabSize,
      blocks: c.nLayers,
      spans,
      forwarding: o.forwarding,
      rttMs: o.rttMs,
      clientThreads: o.threads,
      cores: availableParallelism(),
      genTokens: o.genTokens,
      runs: runs.map(({ tokens, ...rest }) => ({ ...rest, sameTokensAsLocal: same(tokens) })),
      reductions: {
        latencyVsLocal: reduction(local.msPerToken.median, remote.msPerToken.median),
        latencyVsLocalHeadOnly: reduction(headOnly.msPerToken.median, remote.msPerToken.median),
        downlinkTcpVsLocal: reduction(local.downlinkBytesPerToken.tcp, remote.downlinkBytesPerToken.tcp),
        downlinkPayloadVsLocal: reduction(local.downlinkBytesPerToken.payload, remote.downlinkBytesPerToken.payload)
      },
      paper: PAPER,
      headCompute: headCompute(path, o),
      loadAverage: loadavg().map((x) => round(x, 1))
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()))
    if (before === undefined) delete process.env[LINK_DELAY_ENV]
    else process.env[LINK_DELAY_ENV] = before
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, {
    model: LLAMA_32_1B,
    peers: '2',
    'rtt-ms': '25',
    'gen-tokens': '32',
    'prompt-tokens': '16',
    threads: '1',
    kernels: 'auto',
    forwarding: 'chain',
    'warmup-tokens': '4'
  })
  const result = await runHeadBench({
    model: a.required('model', 'FILE or the default shape'),
    peers: a.int('peers', 1),
    rttMs: a.number('rtt-ms', 0, false),
    genTokens: a.int('gen-tokens', 2),
    promptTokens: a.int('prompt-tokens', 1),
    threads: a.int('threads', 1),
    kernels: a.oneOf('kernels', KERNEL_KINDS),
    forwarding: a.oneOf('forwarding', FORWARDINGS),
    warmupTokens: a.int('warmup-tokens', 0)
  })
  console.log(JSON.stringify(result, null, 2))
}
