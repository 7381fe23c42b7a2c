/**
 * `npm run bench -- wire [--model FILE] [--tokens 64] [--forwarding relay|chain] [--kernels reference]
 * [--runs 1]`: wire compression of the edge link (issue 6 §5) on a real local swarm.
 *
 * Two `layerswarm node start` processes split the remote blocks; an in-process client runs
 * greedy generation of `--tokens` tokens for each reference prompt (test/vectors)
 * with the wire in f32, f16 and q8_0 (GGUF Q8_0 blocks), and a single process runs the same with
 * the same kernels. Per wire dtype it prints:
 * - bytes per token: activation bytes (the encoded tensors, client report) and TCP bytes (every
 *   byte the client and node processes sent while generating, from the kernel's tcp_info:
 *   Noise, yamux, protobuf, signed receipts and gossip included);
 * - drift of the final logits against the single process (relative L2 and max-abs per step,
 *   mean and max) over the steps whose context is still the same;
 * - whether the greedy tokens equal the single process's.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createClient, type Forwarding, type GenerateResult } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { defaultModelPath, packageRoot } from '../node/paths.js'
import type { DType } from '../protocol/index.js'
import {
  createEdge,
  createLocalPipeline,
  createShard,
  createTokenizer,
  generateTokens,
  type KernelKind,
  openModelFile,
  selectKernels
} from '../shards/index.js'
import { benchArgs, FORWARDINGS, KERNEL_KINDS } from './options.js'
import { median, round } from './swarm-stats.js'
import { bytesSentSince, firstDivergence, logitDrift, tcpBytesSent } from './wire-stats.js'

const WIRES: ReadonlyArray<[string, DType]> = [
  ['f32', 'f32'],
  ['f16', 'f16'],
  ['q8_0', 'q8_0']
]
const REFERENCE_PROMPTS = ['stories260K_greedy_bos', 'stories260K_greedy_once_upon_a_time']

export interface WireBenchOptions {
  readonly model: string
  readonly tokens: number
  readonly forwarding: Forwarding
  readonly kernels: KernelKind
  readonly runs: number
}

interface Run {
  readonly tokens: number[]
  readonly logits: Float32Array[]
}

/** The reference prompts' text (the bundled ones; another model gets the same text). */
function referencePrompts(): string[] {
  const dir = join(packageRoot(), 'test', 'vectors')
  if (!existsSync(dir)) return ['', 'Once upon a time']
  return REFERENCE_PROMPTS.map((name) => {
    const path = join(dir, `${name}.json`)
    return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as { prompt: string }).prompt : ''
  })
}

async function singleProcess(path: string, o: WireBenchOptions, prompts: string[]): Promise<Run[]> {
  const model = openModelFile(path)
  const kernels = selectKernels({ kind: o.kernels })
  try {
    const edge = createEdge({ model, kernels })
    const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels })
    const tokenizer = createTokenizer(model.vocabulary!)
    const runs: Run[] = []
    for (const [i, prompt] of prompts.entries()) {
      const promptTokens = tokenizer.encode(prompt)
      const logits: Float32Array[] = []
      const tokens: number[] = []
      const pipeline = createLocalPipeline([shard], `single-${i}`, promptTokens.length + o.tokens)
      for await (const t of generateTokens({
        edge,
        pipeline,
        promptTokens,
        maxTokens: o.tokens,
        temperature: 0,
        stopIds: tokenizer.stopIds,
        onLogits: (l) => logits.push(Float32Array.from(l))
      }))
        tokens.push(t)
      await pipeline.close()
      runs.push({ tokens, logits })
    }
    return runs
  } finally {
    kernels.close?.()
    model.close()
  }
}

async function throughSwarm(
  path: string,
  o: WireBenchOptions,
  nodes: LocalNode[],
  wire: DType,
  prompts: string[],
  single: Run[]
) {
  const kernels = selectKernels({ kind: o.kernels })
  const client = await createClient({
    bootstrap: nodes.map((n) => n.addrs[0]),
    model: path,
    forwarding: o.forwarding,
    wireDtype: wire,
    kernels,
    routeTimeoutMs: 60_000,
    stepTimeoutMs: 120_000,
    canaries: false // canary decoys are traffic of their own (bench/canary.ts)
  })
  const pids = [process.pid, ...nodes.map((n) => n.process.pid!)]
  try {
    await client.generate('Once', { maxTokens: 2, temperature: 0 }) // connections, streams, JIT
    const perPrompt = []
    for (const [i, prompt] of prompts.entries()) {
      const tcp: number[] = []
      let last: { result: GenerateResult; logits: Float32Array[] } | undefined
      for (let r = 0; r < o.runs; r++) {
        const logits: Float32Array[] = []
        const before = tcpBytesSent(pids)
        const result = await client.generate(prompt, {
          maxTokens: o.tokens,
          temperature: 0,
          onLogits: (l) => logits.push(Float32Array.from(l))
        })
        tcp.push(bytesSentSince(before, tcpBytesSent(pids)))
        last = { result, logits }
      }
      const { result, logits } = last!
      const ref = single[i]
      const div = firstDivergence(result.tokens, ref.tokens)
      const w = result.report.wire
      perPrompt.push({
        prompt,
        generated: result.tokens.length,
        identicalTokens: div < 0,
        firstDivergence: div < 0 ? null : div,
        drift: logitDrift(logits, ref.logits, div < 0 ? Math.min(logits.length, ref.logits.length) : div + 1),
        positions: w.positions,
        activationBytesPerToken: w.bytesPerToken,
        tcpBytesPerToken: Math.round(median(tcp) / w.positions),
        hops: w.hops.map((h) => ({ span: [h.start, h.end], wire: h.wireDtype }))
      })
    }
    return perPrompt
  } finally {
    await client.close()
    kernels.close?.()
  }
}

export async function runWireBench(o: WireBenchOptions): Promise<Record<string, unknown>> {
  const model = openModelFile(o.model)
  const c = model.config
  model.close()
  if (c.nLayers < 4)
    throw new Error(`${o.model} has ${c.nLayers} blocks; the bench splits the remote span over two nodes and needs 4`)
  const prompts = referencePrompts()
  const single = await singleProcess(o.model, o, prompts)
  // edge 1 + 1 blocks on the client; two nodes split the rest
  const mid = Math.ceil(c.nLayers / 2)
  const args = ['--kernels', o.kernels, '--announce-interval', '60000', '--log-level', 'warn']
  const nodes: LocalNode[] = []
  const result: Record<string, unknown> = {
    bench: 'wire',
    model: o.model,
    config: { dim: c.dim, layers: c.nLayers, vocab: c.vocabSize },
    kernels: o.kernels,
    forwarding: o.forwarding,
    tokens: o.tokens,
    runs: o.runs,
    spans: [
      [0, mid],
      [mid, c.nLayers]
    ]
  }
  try {
    nodes.push(await startLocalNode({ model: o.model, layers: `0:${mid}`, args, startTimeoutMs: 600_000 }))
    nodes.push(
      await startLocalNode({
        model: o.model,
        layers: `${mid}:${c.nLayers}`,
        bootstrap: [nodes[0].addrs[0]],
        args,
        startTimeoutMs: 600_000
      })
    )
    const wires: Record<string, unknown> = {}
    const perToken: Record<string, { activation: number; tcp: number }> = {}
    for (const [name, dtype] of WIRES) {
      const runs = await throughSwarm(o.model, o, nodes, dtype, prompts, single)
      const sum = (f: (r: (typeof runs)[number]) => number) => runs.reduce((a, r) => a + f(r), 0)
      const positions = sum((r) => r.positions)
      perToken[name] = {
        activation: Math.round(sum((r) => r.activationBytesPerToken * r.positions) / positions),
        tcp: Math.round(sum((r) => r.tcpBytesPerToken * r.positions) / positions)
      }
      wires[name] = {
        activationBytesPerToken: perToken[name].activation,
        tcpBytesPerToken: perToken[name].tcp,
        identicalTokens: runs.every((r) => r.identicalTokens),
        prompts: runs
      }
    }
    result.wires = wires
    result.ratiosToF32 = Object.fromEntries(
      WIRES.slice(1).map(([name]) => [
        name,
        {
          activationBytes: round(perToken[name].activation / perToken.f32.activation),
          tcpBytes: round(perToken[name].tcp / perToken.f32.tcp)
        }
      ])
    )
  } finally {
    await Promise.all(nodes.map((n) => n.stop()))
  }
  return result
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, { model: undefined, tokens: '64', forwarding: 'relay', kernels: undefined, runs: '1' })
  const forwarding = a.oneOf('forwarding', FORWARDINGS)
  const tokens = a.int('tokens', 1)
  const runs = a.int('runs', 1)
  const model = a.string('model') ?? defaultModelPath()
  // the bundled model on the reference kernels unless told (selectKernelsFor keeps models under 256 dims on them)
  const kernels =
    a.string('kernels') === undefined ? (a.string('model') ? 'auto' : 'reference') : a.oneOf('kernels', KERNEL_KINDS)
  console.log(JSON.stringify(await runWireBench({ model, tokens, forwarding, kernels, runs }), null, 2))
}
