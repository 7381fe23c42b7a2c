/**
 * Whole-model benchmark: `npm run bench -- engine --model FILE [--threads N] [--prompt-tokens 128]
 * [--gen-tokens 64] [--runs 3] [--kernels auto|reference|wasm|native] [--kv-dtype f32|f16|q8_0]
 * [--compare llama-cpp] [--backend engine|ggml-cpu|ggml-cuda|ggml-vulkan|ggml-metal]`. Prints one JSON object: prefill and decode tokens/s (medians), weight
 * bytes read per decoded token, the streaming read bandwidth of the same kernel threads measured
 * in the same run, decode as a fraction of that roofline (median over `runs` probe-then-run
 * pairs), and peak resident memory against weights + KV. Timings are medians of `runs` runs
 * after one warm-up run.
 */
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { GgmlShard } from '../shards/ggml/ggml-shard.js'
import { GGML_BACKENDS, type GgmlBackend } from '../shards/ggml/package.js'
import {
  cpuInfo,
  createEdge,
  createLocalPipeline,
  createShard,
  type FastKernels,
  type KernelKind,
  KernelMemoryError,
  type Kernels,
  KV_DTYPES,
  type KvDType,
  kernelChoiceOf,
  kernelChoiceSummary,
  kvRowBytes,
  openModelFile,
  selectKernels
} from '../shards/index.js'
import { nativeSide } from './engine-native.js'
import { runLlamaCpp } from './llama-cpp.js'
import { expertBytes } from './moe-bytes.js'

export interface EngineBenchOptions {
  readonly model: string
  readonly threads: number
  readonly promptTokens: number
  readonly genTokens: number
  readonly runs: number
  readonly kernels: KernelKind
  readonly kvDType: KvDType
  readonly compare?: 'llama-cpp'
  /** A ggml backend runs the blocks (issue 32); the engine's kernels still run embeddings and head. */
  readonly backend?: GgmlBackend
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d
const rssBytes = (): number => process.resourceUsage().maxRSS * 1024

function argmax(a: Float32Array): number {
  let best = 0
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i
  return best
}

/** Top-1 minus top-2 logit: how near a greedy step is to a tie. */
function margin(a: Float32Array, best: number): number {
  let second = Number.NEGATIVE_INFINITY
  for (let i = 0; i < a.length; i++) if (i !== best && a[i] > second) second = a[i]
  return a[best] - second
}

function isFast(k: Kernels): k is FastKernels {
  return typeof (k as FastKernels).readBandwidth === 'function'
}

/** Node-side streaming read (one thread) where the kernel set cannot measure it. */
function nodeBandwidth(bytes: number): number {
  const a = new Float64Array(bytes / 8).fill(1)
  let best = Number.POSITIVE_INFINITY
  let sink = 0
  for (let r = 0; r < 3; r++) {
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < a.length; i += 8)
      sink += a[i] + a[i + 1] + a[i + 2] + a[i + 3] + a[i + 4] + a[i + 5] + a[i + 6] + a[i + 7]
    best = Math.min(best, Number(process.hrtime.bigint() - t0))
  }
  return sink > 0 ? bytes / best : 0
}

/** The kernels' own streaming read over the largest of 512/256/128 MiB that still fits their heap. */
function fastBandwidth(k: FastKernels): number {
  for (const mib of [512, 256, 128]) {
    try {
      return k.readBandwidth(mib * 2 ** 20, 5)
    } catch (e) {
      if (!(e instanceof KernelMemoryError)) throw e
    }
  }
  return nodeBandwidth(128 * 2 ** 20)
}

export async function runEngineBench(o: EngineBenchOptions): Promise<Record<string, unknown>> {
  const rssStart = process.memoryUsage().rss
  const kernels = selectKernels({ kind: o.kernels, threads: o.threads })
  // Every kernel thread started and one tiny call run, so the runtime baseline below is node,
  // its modules and the kernel threads, before any byte of the model is read.
  if (isFast(kernels)) await kernels.ready()
  kernels.matmul(
    new Float32Array(4),
    new Float32Array(4),
    kernels.prepare({ dtype: 'f32', rows: 4, cols: 1, data: new Uint8Array(16) }),
    1
  )
  const rssRuntime = process.memoryUsage().rss
  const model = openModelFile(o.model)
  try {
    const c = model.config
    const maxLength = o.promptTokens + o.genTokens
    if (maxLength > c.seqLen) throw new Error(`prompt + gen tokens (${maxLength}) exceed the model's context of ${c.seqLen}`)
    const tLoad = performance.now()
    const edge = createEdge({ model, kernels })
    const shard = o.backend
      ? new GgmlShard({ model, start: 0, end: c.nLayers, backend: o.backend, kvDType: o.kvDType, threads: o.threads })
      : createShard({ model, start: 0, end: c.nLayers, kernels, kvDType: o.kvDType })
    const loadMs = performance.now() - tLoad
    const prompt = Array.from({ length: o.promptTokens }, (_, i) => 3 + ((i * 7919) % (c.vocabSize - 3)))
    /** One prompt and genTokens greedy decode steps in a fresh session: tokens/s of each. */
    let greedy: number[] = []
    let margins: number[] = []
    const runOnce = async (id: string): Promise<{ prefill: number; decode: number }> => {
      const pipeline = createLocalPipeline([shard], id, maxLength)
      const t0 = performance.now()
      const h = await pipeline.forward(edge.embed(prompt), 0)
      let logits = edge.lastLogits(h, o.promptTokens)
      let next = argmax(logits)
      const tokens = [next]
      const gaps = [margin(logits, next)]
      const t1 = performance.now()
      for (let i = 0; i < o.genTokens; i++) {
        const out = await pipeline.forward(edge.embed([next]), o.promptTokens + i)
        logits = edge.lastLogits(out, 1)
        next = argmax(logits)
        tokens.push(next)
        gaps.push(margin(logits, next))
      }
      const t2 = performance.now()
      await pipeline.close()
      greedy = tokens
      margins = gaps
      return { prefill: (o.promptTokens * 1000) / (t1 - t0), decode: (o.genTokens * 1000) / (t2 - t1) }
    }
    const prefill: number[] = []
    const decode: number[] = []
    await runOnce('warm-up') // JIT, scratch buffers
    for (let r = 0; r < o.runs; r++) {
      const t = await runOnce(`run${r}`)
      prefill.push(t.prefill)
      decode.push(t.decode)
    }
    // Peak memory before the bandwidth probe, whose buffer would count in it.
    const peakRss = rssBytes()
    // Per decoded token: every block matrix and norm (of a mixture, only the nUsed experts the
    // token is routed to, moe-bytes.ts), the LM head, one embedding row.
    const moe = expertBytes(model)
    const unusedExperts = moe ? moe.expertBytesHeld - moe.expertBytesPerToken : 0
    const weightBytesPerToken = shard.weightBytes - unusedExperts + edge.headBytes + c.dim * 4
    const weightBytesHeld = shard.weightBytes + edge.weightBytes
    const kvBytes = c.nLayers * 2 * maxLength * kvRowBytes(o.kvDType, c.kvDim)
    // The roofline: streaming bandwidth probed right before each of `runs` more runs, so a
    // shared machine's load changes both sides of each ratio alike; the fraction is the
    // median of the per-run ratios.
    const roofline: Array<{ bandwidthGBs: number; decodeTokensPerSecond: number; fraction: number }> = []
    for (let r = 0; r < o.runs; r++) {
      const bw = isFast(kernels) ? fastBandwidth(kernels) : nodeBandwidth(512 * 2 ** 20)
      const t = await runOnce(`roofline${r}`)
      roofline.push({
        bandwidthGBs: round(bw),
        decodeTokensPerSecond: round(t.decode),
        fraction: round((t.decode * weightBytesPerToken) / 1e9 / bw, 3)
      })
    }
    const bandwidthGBs = median(roofline.map((x) => x.bandwidthGBs))
    const decodeTps = median(decode)
    const result: Record<string, unknown> = {
      bench: 'engine',
      model: o.model,
      config: {
        dim: c.dim,
        layers: c.nLayers,
        heads: c.nHeads,
        kvHeads: c.nKvHeads,
        ffn: c.hiddenDim,
        vocab: c.vocabSize,
        dtype: model.weightDType
      },
      kernels: kernels.name,
      ...(o.backend && shard instanceof GgmlShard ? { backend: o.backend, device: shard.device.description } : {}),
      // Issue 40: figures are only comparable on the same CPU; the calibrated kernel choice.
      cpu: cpuInfo(),
      ...(kernelChoiceOf(kernels)
        ? { kernelChoice: kernelChoiceSummary(kernelChoiceOf(kernels) as NonNullable<ReturnType<typeof kernelChoiceOf>>) }
        : {}),
      nativeIsa: process.env.LAYERSWARM_NATIVE_ISA || undefined,
      threads: isFast(kernels) ? kernels.threads : 1,
      kvDType: o.kvDType,
      promptTokens: o.promptTokens,
      genTokens: o.genTokens,
      runs: o.runs,
      loadMs: round(loadMs, 0),
      prefillTokensPerSecond: round(median(prefill)),
      decodeTokensPerSecond: round(decodeTps),
      prefillRuns: prefill.map((x) => round(x)),
      decodeRuns: decode.map((x) => round(x)),
      weightBytesPerToken,
      ...(moe ? { moe } : {}),
      streamBandwidthGBs: round(bandwidthGBs),
      decodeGBs: round((decodeTps * weightBytesPerToken) / 1e9),
      decodeRooflineFraction: median(roofline.map((x) => x.fraction)),
      rooflineRuns: roofline,
      memory: {
        // peakRss is the process's high-water mark (getrusage) through loading and every run;
        // spanPeak subtracts only the runtime measured before the model was opened (node with
        // its modules and the started kernel threads): what holding and running the span adds,
        // including the model header, activations, allocator and garbage-collector slack.
        peakRssBytes: peakRss,
        rssAtStartBytes: rssStart,
        rssWithKernelThreadsBytes: rssRuntime,
        weightBytes: weightBytesHeld,
        kvBytes,
        peakRssOverWeightsPlusKv: round(peakRss / (weightBytesHeld + kvBytes), 3),
        // The span's own memory: peak minus the runtime (node, kernel threads) before loading.
        spanPeakOverWeightsPlusKv: round((peakRss - rssRuntime) / (weightBytesHeld + kvBytes), 3)
      }
    }
    if (o.compare === 'llama-cpp') {
      result.llamaCppNative = nativeSide(o, prompt, greedy, margins, decodeTps, median(prefill))
      const ll = runLlamaCpp(o.model, o.threads, o.promptTokens, o.genTokens, o.runs, c.vocabSize)
      result.llamaCpp = ll.ok
        ? {
            ...ll,
            decodeRatio: round(decodeTps / (ll.decodeTokensPerSecond ?? Number.NaN), 3),
            prefillRatio: round(median(prefill) / (ll.prefillTokensPerSecond ?? Number.NaN), 3)
          }
        : ll
    }
    return result
  } finally {
    model.close()
    kernels.close?.()
  }
}

/** `--backend`: the engine (default) or one of the ggml backends. */
function backendOf(v: string | undefined): GgmlBackend | undefined {
  if (v === undefined || v === 'engine') return undefined
  if (!(GGML_BACKENDS as readonly string[]).includes(v))
    throw new Error(`bench engine: --backend engine|${GGML_BACKENDS.join('|')}`)
  return v as GgmlBackend
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      threads: { type: 'string' },
      'prompt-tokens': { type: 'string', default: '128' },
      'gen-tokens': { type: 'string', default: '64' },
      runs: { type: 'string', default: '3' },
      kernels: { type: 'string', default: 'auto' },
      'kv-dtype': { type: 'string', default: 'f32' },
      compare: { type: 'string' },
      backend: { type: 'string' }
    }
  })
  if (!values.model) throw new Error('bench engine: --model FILE is required (make one with `layerswarm make-model`)')
  const int = (name: string, v: string | undefined, min: number): number => {
    const n = Number(v)
    if (!Number.isInteger(n) || n < min) throw new Error(`bench engine: --${name} must be an integer ≥ ${min}`)
    return n
  }
  if (!['auto', 'reference', 'wasm', 'native'].includes(values.kernels))
    throw new Error('bench engine: --kernels auto|reference|wasm|native')
  if (!(KV_DTYPES as readonly string[]).includes(values['kv-dtype'] as string))
    throw new Error('bench engine: --kv-dtype f32|f16|q8_0')
  if (values.compare !== undefined && values.compare !== 'llama-cpp') throw new Error('bench engine: --compare llama-cpp')
  const result = await runEngineBench({
    model: values.model,
    threads: values.threads === undefined ? availableParallelism() : int('threads', values.threads, 1),
    promptTokens: int('prompt-tokens', values['prompt-tokens'], 1),
    genTokens: int('gen-tokens', values['gen-tokens'], 1),
    runs: int('runs', values.runs, 1),
    kernels: values.kernels as KernelKind,
    kvDType: values['kv-dtype'] as KvDType,
    compare: values.compare as 'llama-cpp' | undefined,
    backend: backendOf(values.backend)
  })
  console.log(JSON.stringify(result, null, 2))
}
