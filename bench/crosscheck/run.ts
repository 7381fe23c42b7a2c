/**
 * `npm run crosscheck [-- --types Q4_0,Q4_K_M --tokens 24 --threads 2 --shape 512,4,8,4,1536,2048
 * --kernels auto|native|reference]`:
 * files quantised by llama.cpp's own llama-quantize decode to llama.cpp's own greedy tokens,
 * per type. Sources: the bundled models/stories260K.gguf and a random model of a larger shape
 * written by our writer (f32). Both engines get the same prompt token ids. Builds llama.cpp
 * natively into the cache on first use (llama-cpp-native.ts; opt-in, minutes). Prints one JSON
 * object; `equal` is whether every greedy token matched, `firstDiff` the first step that did not.
 */
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import {
  createEdge,
  createLocalPipeline,
  createShard,
  type KernelKind,
  openModelFile,
  parseShape,
  selectKernelsFor,
  writeRandomModel
} from '../../shards/index.js'
import { buildNativeLlamaCpp, llamaGreedy, llamaQuantize } from './llama-cpp-native.js'

export const CROSSCHECK_TYPES = [
  'F16',
  'BF16',
  'Q8_0',
  'Q4_0',
  'Q4_1',
  'Q5_0',
  'Q5_1',
  'Q2_K',
  'Q3_K_M',
  'Q4_K_M',
  'Q5_K_M',
  'Q6_K'
]

function argmax(a: Float32Array): number {
  let best = 0
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i
  return best
}

/** Top logit minus the runner-up: how close a greedy step was to a tie. */
function margin(a: Float32Array): number {
  const best = argmax(a)
  let second = Number.NEGATIVE_INFINITY
  for (let i = 0; i < a.length; i++) if (i !== best && a[i] > second) second = a[i]
  return a[best] - second
}

/** Our engine's greedy tokens (kernels as `generate` picks them: tiny models on the reference). */
export async function oursGreedy(
  path: string,
  threads: number,
  n: number,
  prompt: readonly number[],
  kind: KernelKind = 'auto'
): Promise<{ tokens: number[]; margins: number[]; kernels: string }> {
  const model = openModelFile(path)
  const kernels = selectKernelsFor(model.config, { threads, kind })
  try {
    const c = model.config
    const edge = createEdge({ model, kernels })
    // f16 KV as llama.cpp's default cache type.
    const shard = createShard({ model, start: 0, end: c.nLayers, kernels, kvDType: 'f16' })
    const pipeline = createLocalPipeline([shard], 'crosscheck', prompt.length + n)
    const tokens: number[] = []
    const margins: number[] = []
    let h = await pipeline.forward(edge.embed([...prompt]), 0)
    for (let i = 0; i < n; i++) {
      if (i > 0) h = await pipeline.forward(edge.embed([tokens[i - 1]]), prompt.length + i - 1)
      const logits = edge.lastLogits(h, i === 0 ? prompt.length : 1)
      tokens.push(argmax(logits))
      margins.push(margin(logits))
    }
    await pipeline.close()
    return { tokens, margins, kernels: kernels.name }
  } finally {
    model.close()
    kernels.close?.()
  }
}

export async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'families') return (await import('./families.js')).main(argv.slice(1))
  const { values } = parseArgs({
    args: argv,
    options: {
      types: { type: 'string', default: CROSSCHECK_TYPES.join(',') },
      tokens: { type: 'string', default: '24' },
      threads: { type: 'string', default: '2' },
      shape: { type: 'string', default: '512,4,8,4,1536,2048' },
      keep: { type: 'boolean', default: false },
      kernels: { type: 'string', default: 'auto' }
    }
  })
  const n = Number(values.tokens)
  const threads = Number(values.threads)
  const log = (line: string) => process.stderr.write(`crosscheck: ${line}\n`)
  const tools = buildNativeLlamaCpp(log)
  const work = join(tools.dir, 'crosscheck')
  mkdirSync(work, { recursive: true })
  const sources: Array<{ name: string; path: string }> = [{ name: 'stories260K', path: 'models/stories260K.gguf' }]
  if (values.shape) {
    const path = join(work, 'random-f32.gguf')
    log(`writing a random ${values.shape} model (f32) with our writer`)
    writeRandomModel(path, parseShape(values.shape), { dtype: 'f32', seed: 1, seqLen: 256 })
    sources.push({ name: `random ${values.shape}`, path })
  }
  const results: Array<Record<string, unknown>> = []
  for (const source of sources) {
    const vocab = openModelFile(source.path)
    const vocabSize = vocab.config.vocabSize
    vocab.close()
    // BOS then fixed ids: both engines see the same tokens whatever their tokenizers do.
    const prompt = [1, ...Array.from({ length: 7 }, (_, i) => 3 + ((i * 7919) % (vocabSize - 3)))]
    for (const type of values.types.split(',')) {
      const file = join(work, `${source.name.replace(/[^\w]+/g, '_')}-${type}.gguf`)
      try {
        llamaQuantize(tools, source.path, file, type)
        const theirs = llamaGreedy(tools, file, threads, n, prompt)
        const ours = await oursGreedy(file, threads, n, prompt, values.kernels as KernelKind)
        const firstDiff = ours.tokens.findIndex((t, i) => t !== theirs.tokens[i])
        results.push({
          source: source.name,
          type,
          equal: firstDiff === -1,
          firstDiff: firstDiff === -1 ? null : firstDiff,
          // our top-1 minus top-2 logit at that step, and the smallest over the run
          marginAtDiff: firstDiff === -1 ? null : Math.round(ours.margins[firstDiff] * 1e4) / 1e4,
          minMargin: Math.round(Math.min(...ours.margins) * 1e4) / 1e4,
          kernels: ours.kernels,
          ours: ours.tokens,
          llamaCpp: theirs.tokens
        })
        log(
          `${source.name} ${type}: ${firstDiff === -1 ? 'equal' : `differs from step ${firstDiff} (our margin there ${ours.margins[firstDiff].toFixed(4)})`} (${ours.kernels})`
        )
      } catch (e) {
        results.push({ source: source.name, type, error: e instanceof Error ? e.message.slice(0, 400) : String(e) })
        log(`${source.name} ${type}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`)
      } finally {
        if (!values.keep) rmSync(file, { force: true })
      }
    }
  }
  console.log(JSON.stringify({ bench: 'crosscheck', llamaCpp: tools.tag, tokens: n, threads, results }, null, 2))
}
