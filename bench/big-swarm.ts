/**
 * `npm run bench -- big-swarm --model FILE [--nodes 3] [--tokens 8] [--prompt TEXT]
 * [--kv-dtype f16] [--canary-rate R] [--edge-first 1] [--edge-last 1] [--node-threads N]`:
 * issue #14's "8b Q4_K_M over 3 local node processes and a client: greedy tokens equal one
 * process", every part its own process. First `layerswarm generate` runs the whole model in one
 * process; then N `node start` processes split the blocks between the client's edges, and a
 * `layerswarm generate --bootstrap` client (edge blocks, 128K-vocabulary head, canaries at the
 * client's default rate unless told) generates the same prompt greedily through them. Prints one
 * JSON object: both token lists and whether they are equal, decode tokens/s of both, the
 * client's canary build time, each process's peak RSS (VmHWM, polled), and per node the budget
 * 1.15 × (span weights + reserved KV) + 150 MB from its `node start` line. Linux only (/proc).
 *
 * The activations cross the wire as f32 (`--wire f32`) and every process keeps its KV cache in
 * the same dtype, so the swarm computes what one process computes, bit for bit.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { packageRoot } from '../node/paths.js'
import { openModelFile } from '../shards/index.js'
import { benchArgs, TENSOR_DTYPES } from './options.js'
import { evenSpans } from './swarm-setup.js'

const MB = 2 ** 20
/** The compiled CLI, also when this module runs from source (the opt-in e2e test). */
const CLI = import.meta.url.endsWith('.ts')
  ? join(packageRoot(), 'dist', 'node', 'cli.js')
  : join(dirname(fileURLToPath(import.meta.url)), '..', 'node', 'cli.js')

export interface BigSwarmOptions {
  readonly model: string
  readonly nodes: number
  readonly tokens: number
  readonly prompt: string
  readonly kvDType: 'f32' | 'f16' | 'q8_0'
  /** The client's canary base rate (undefined: the client's default; 0: no canaries). */
  readonly canaryRate?: number
  readonly edgeFirst: number
  readonly edgeLast: number
  /** Kernel threads of each node process (default: the node's default, all cores). */
  readonly nodeThreads?: number
  /** Per process (a node reading its span, a generate run). */
  readonly timeoutMs: number
}

/** VmHWM and VmRSS of a live process, bytes (NaN once it is gone). */
export function residentBytes(pid: number): { peak: number; now: number } {
  let status = ''
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8')
  } catch {
    return { peak: Number.NaN, now: Number.NaN }
  }
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024
  return { peak: kb('VmHWM'), now: kb('VmRSS') }
}

interface CliRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
  /** The last VmHWM read while it ran (polled every 250 ms). */
  readonly peakRssBytes: number
}

/** Run the CLI as a child process, polling its peak RSS (a finished process's VmHWM is gone). */
function runCli(args: string[], timeoutMs: number): Promise<CliRun> {
  return new Promise((resolve) => {
    const t0 = performance.now()
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    let peak = 0
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const poll = setInterval(() => {
      const p = residentBytes(child.pid as number).peak
      if (p > peak) peak = p
    }, 250)
    const kill = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (code, signal) => {
      clearInterval(poll)
      clearTimeout(kill)
      resolve({ code, signal, stdout, stderr, ms: performance.now() - t0, peakRssBytes: peak })
    })
  })
}

interface GenerateJson {
  tokens: number[]
  stats: { loadMs: number; prefillMs: number; decodeMs: number; decodeTokensPerSecond: number }
  report?: { routes?: Array<Array<{ peerId: string; start: number; end: number }>>; canaries?: Array<Record<string, unknown>> }
}

function parseGenerate(run: CliRun, what: string): GenerateJson {
  const line = run.stdout.trim().split('\n').at(-1) ?? ''
  if (run.code !== 0 || !line.startsWith('{'))
    throw new Error(
      `${what} exited with ${run.code ?? run.signal} after ${Math.round(run.ms)} ms (peak RSS ${Math.round(run.peakRssBytes / MB)} MiB): ${run.stderr.trim().split('\n').at(-1)}`
    )
  return JSON.parse(line) as GenerateJson
}

const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d

export async function runBigSwarm(o: BigSwarmOptions): Promise<Record<string, unknown>> {
  const model = openModelFile(o.model)
  const c = model.config
  const weights = model.weightDType
  model.close()
  const spans = evenSpans(o.edgeFirst, c.nLayers - o.edgeLast, o.nodes)
  const sampling = ['--prompt', o.prompt, '--max-tokens', String(o.tokens), '--temperature', '0', '--json']
  const loadBefore = loadavg()
  // One process: the whole model, the same prompt, greedy.
  const oneRun = await runCli(['generate', '--model', o.model, ...sampling, '--kv-dtype', o.kvDType], o.timeoutMs)
  const one = parseGenerate(oneRun, 'generate (one process)')
  const nodes: LocalNode[] = []
  try {
    const args = ['--kv-dtype', o.kvDType, '--announce-interval', '300']
    if (o.nodeThreads !== undefined) args.push('--threads', String(o.nodeThreads))
    for (const [a, b] of spans) {
      const bootstrap = nodes.length > 0 ? [nodes[0].addrs[0]] : undefined
      nodes.push(await startLocalNode({ model: o.model, layers: `${a}:${b}`, bootstrap, args, startTimeoutMs: o.timeoutMs }))
    }
    const started = nodes.map((n) => residentBytes(n.process.pid as number))
    const client = ['generate', '--model', o.model, ...sampling, '--kv-dtype', o.kvDType, '--wire', 'f32']
    client.push('--bootstrap', nodes.map((n) => n.addrs[0]).join(','))
    client.push('--edge-first', String(o.edgeFirst), '--edge-last', String(o.edgeLast))
    if (o.canaryRate !== undefined) client.push('--canary-rate', String(o.canaryRate))
    // Node start answers `info` at once, but a span announcement can take a moment: retry NO_ROUTE.
    let swarmRun: CliRun
    for (let attempt = 1; ; attempt++) {
      swarmRun = await runCli(client, o.timeoutMs)
      if (swarmRun.code === 0 || attempt >= 5 || !swarmRun.stderr.includes('NO_ROUTE')) break
      await new Promise((r) => setTimeout(r, 3000))
    }
    const swarm = parseGenerate(swarmRun, 'generate (client of the swarm)')
    const equal = swarm.tokens.length === one.tokens.length && swarm.tokens.every((t, i) => t === one.tokens[i])
    const nodeReports = nodes.map((n, i) => {
      const info = n as unknown as { kernels?: string; weightBytes?: number; kvBytes?: number }
      const weightBytes = info.weightBytes ?? Number.NaN
      const kvBytes = info.kvBytes ?? Number.NaN
      const budget = 1.15 * (weightBytes + kvBytes) + 150 * MB
      const peak = residentBytes(n.process.pid as number).peak
      return {
        layers: spans[i],
        kernels: info.kernels,
        weightBytes,
        kvBytes,
        rssAfterStartBytes: started[i].now,
        peakRssBytes: peak,
        budgetBytes: Math.round(budget),
        withinBudget: peak <= budget,
        peakOverWeightsPlusKv: round(peak / (weightBytes + kvBytes), 3)
      }
    })
    return {
      bench: 'big-swarm',
      model: o.model,
      config: { dim: c.dim, layers: c.nLayers, vocab: c.vocabSize, context: c.seqLen, weights },
      kvDType: o.kvDType,
      wire: 'f32',
      edge: { first: o.edgeFirst, last: o.edgeLast },
      canaryRate: o.canaryRate ?? 'default',
      prompt: o.prompt,
      equal,
      tokens: { swarm: swarm.tokens, oneProcess: one.tokens },
      decodeTokensPerSecond: { swarm: swarm.stats.decodeTokensPerSecond, oneProcess: one.stats.decodeTokensPerSecond },
      // the client's first step waits for its canary set (built on its own kernels): in prefillMs
      client: { ...swarm.stats, ms: Math.round(swarmRun.ms), peakRssBytes: swarmRun.peakRssBytes },
      oneProcess: { ...one.stats, ms: Math.round(oneRun.ms), peakRssBytes: oneRun.peakRssBytes },
      route: swarm.report?.routes?.at(-1)?.map((h) => [h.start, h.end]),
      canaries: swarm.report?.canaries?.map((v) => ({ sent: v.canariesSent, excluded: v.excluded })),
      nodes: nodeReports,
      allNodesWithinBudget: nodeReports.every((r) => r.withinBudget),
      loadAverage: { before: loadBefore.map((x) => round(x)), after: loadavg().map((x) => round(x)) }
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()))
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, {
    model: undefined,
    nodes: '3',
    tokens: '8',
    prompt: 'Once upon a time',
    'kv-dtype': 'f32',
    'canary-rate': undefined,
    'edge-first': '1',
    'edge-last': '1',
    'node-threads': undefined,
    'timeout-minutes': '60'
  })
  const result = await runBigSwarm({
    model: a.required('model', 'FILE (e.g. make-model --shape 8b --dtype q4_k_m)'),
    nodes: a.int('nodes', 1),
    tokens: a.int('tokens', 1),
    prompt: a.required('prompt', 'text'),
    kvDType: a.oneOf('kv-dtype', TENSOR_DTYPES),
    canaryRate: a.optional('canary-rate', 0, false),
    edgeFirst: a.int('edge-first', 0),
    edgeLast: a.int('edge-last', 0),
    nodeThreads: a.optional('node-threads', 1),
    timeoutMs: a.number('timeout-minutes', 1, false) * 60_000
  })
  console.log(JSON.stringify(result, null, 2))
}
