import {
  computeModelId,
  createEdge,
  createReferenceKernels,
  createSampler,
  createShard,
  createTokenizer,
  type Kernels,
  type ModelFile
} from '../shards/index.js'
import { CanaryArgumentError } from './errors.js'
import { DEFAULT_CANARY_PROMPTS } from './prompts.js'
import { createSpanRunner } from './span-runner.js'

/** One canary: a real prompt, continued by the model, and its hidden states at the boundary. */
export interface Canary {
  readonly text: string
  /** Token ids [L]: the prompt's tokens (BOS first), then tokens the model sampled after it. */
  readonly tokens: readonly number[]
  /** How many of `tokens` came from the prompt text (the rest were generated). */
  readonly promptLength: number
  /** Hidden states entering block `boundary` [L, dim]: embed + blocks [0, boundary). */
  readonly inputs: Float32Array
  /** Reference outputs after blocks [boundary, ends[k]) [L, dim], parallel to the set's `ends`. */
  readonly outputs: readonly Float32Array[]
}

export interface CanarySet {
  readonly modelId: string
  readonly boundary: number
  /** Span ends the canaries may be sent to (each > boundary), ascending. */
  readonly ends: readonly number[]
  readonly dim: number
  /** Name of the (trusted) kernel set the references were computed with. */
  readonly kernels: string
  readonly canaries: readonly Canary[]
}

export interface BuildCanarySetOptions {
  readonly model: ModelFile
  /** Trusted kernels for the references; the TypeScript reference kernels by default. */
  readonly kernels?: Kernels
  readonly boundary: number
  readonly ends: readonly number[]
  /** Real prompts; DEFAULT_CANARY_PROMPTS by default. */
  readonly prompts?: readonly string[]
  /** Tokens per canary, prompt plus sampled continuation (default 40, at most the context). */
  readonly tokensPerPrompt?: number
  /** At most this many prompt tokens are kept (default 24), so there is a continuation. */
  readonly maxPromptTokens?: number
  /** Seed of the continuation sampler (temperature 1, as ordinary generation). */
  readonly seed?: number
  /** Called after each canary is built: (built, total); for progress bars. */
  readonly onProgress?: (built: number, total: number) => void
}

const isInt = (x: unknown, min: number): x is number => Number.isInteger(x) && (x as number) >= min

/**
 * A canary set for one model and one span boundary b. Each prompt is tokenized (BOS first),
 * cut to maxPromptTokens, continued by sampling the whole model at temperature 1 (so the
 * tokens are distributed as ordinary generations), run through embed + blocks [0, b) to get the
 * inputs, and through [b, e) for every e in `ends` to get the reference outputs.
 * Building again with the same options regenerates the same set.
 */
export function buildCanarySet(options: BuildCanarySetOptions): CanarySet {
  const { model } = options
  if (!model || typeof model !== 'object' || !model.config) throw new CanaryArgumentError('buildCanarySet needs a model')
  const n = model.config.nLayers
  const { boundary } = options
  if (!isInt(boundary, 0) || boundary >= n) throw new CanaryArgumentError(`boundary ${boundary} must be in [0, ${n})`)
  const ends = [...new Set(options.ends ?? [])].sort((a, b) => a - b)
  if (ends.length === 0 || ends.some((e) => !isInt(e, boundary + 1) || e > n)) {
    throw new CanaryArgumentError(`ends must be a non-empty list of integers in (${boundary}, ${n}]`)
  }
  const prompts = options.prompts ?? DEFAULT_CANARY_PROMPTS
  if (!Array.isArray(prompts) || prompts.length === 0 || prompts.some((p) => typeof p !== 'string' || p.length === 0)) {
    throw new CanaryArgumentError('prompts must be a non-empty list of non-empty strings')
  }
  const total = options.tokensPerPrompt ?? 40
  const maxPrompt = options.maxPromptTokens ?? 24
  if (!isInt(total, 2) || total > model.config.seqLen) {
    throw new CanaryArgumentError(`tokensPerPrompt must be an integer in [2, ${model.config.seqLen}]`)
  }
  if (!isInt(maxPrompt, 1) || maxPrompt > total) throw new CanaryArgumentError(`maxPromptTokens must be in [1, ${total}]`)
  const seed = options.seed ?? 1
  if (!Number.isSafeInteger(seed)) throw new CanaryArgumentError('seed must be a safe integer')
  if (!model.vocabulary) throw new CanaryArgumentError('the model file has no tokenizer vocabulary')

  const kernels = options.kernels ?? createReferenceKernels()
  const tokenizer = createTokenizer(model.vocabulary)
  const edge = createEdge({ model, kernels })
  const full = createShard({ model, start: 0, end: n, kernels })
  const runner = createSpanRunner({ model, kernels, start: boundary, maxEnd: ends[ends.length - 1] })
  const dim = model.config.dim
  const stops = new Set([tokenizer.bosId, tokenizer.eosId, ...tokenizer.stopIds])
  try {
    const canaries = prompts.map((text, i): Canary => {
      const promptTokens = tokenizer.encode(text, { bos: true }).slice(0, maxPrompt)
      const tokens = continueTokens(full, edge, promptTokens, total, seed * 1000 + i, stops)
      let inputs = edge.embed(tokens)
      if (boundary > 0) {
        full.openSession('canary-prefix', { maxLength: tokens.length, start: 0, end: boundary })
        inputs = full.forward('canary-prefix', inputs, 0)
        full.closeSession('canary-prefix')
      }
      const outputs = runner.run(inputs, [tokens.length], ends)
      options.onProgress?.(i + 1, prompts.length)
      return { text, tokens, promptLength: promptTokens.length, inputs, outputs }
    })
    return { modelId: computeModelId(model), boundary, ends, dim, kernels: kernels.name, canaries }
  } finally {
    runner.close()
    full.close()
  }
}

/** Sample the whole model after the prompt until `total` tokens (or a stop token). */
function continueTokens(
  full: ReturnType<typeof createShard>,
  edge: ReturnType<typeof createEdge>,
  prompt: readonly number[],
  total: number,
  seed: number,
  stops: ReadonlySet<number>
): number[] {
  const tokens = [...prompt]
  const sampler = createSampler({ temperature: 1, seed })
  full.openSession('canary-gen', { maxLength: total })
  try {
    let input: number[] = tokens
    let pos = 0
    while (tokens.length < total) {
      const out = full.forward('canary-gen', edge.embed(input), pos)
      pos += input.length
      const next = sampler.sample(edge.lastLogits(out, input.length), tokens)
      if (stops.has(next)) break // the story ended
      tokens.push(next)
      input = [next]
    }
  } finally {
    full.closeSession('canary-gen')
  }
  return tokens
}

function endIndex(set: CanarySet, end: number): number {
  const k = set.ends.indexOf(end)
  if (k < 0) throw new CanaryArgumentError(`the set has no references for span end ${end} (ends: ${set.ends.join(', ')})`)
  return k
}

function canaryAt(set: CanarySet, index: number): Canary {
  if (!Number.isInteger(index) || index < 0 || index >= set.canaries.length) {
    throw new CanaryArgumentError(`canary index ${index} is outside [0, ${set.canaries.length})`)
  }
  return set.canaries[index]
}

function rowsOf(data: Float32Array, dim: number, position: number, rows: number): Float32Array {
  const L = data.length / dim
  if (!Number.isInteger(position) || !Number.isInteger(rows) || rows < 1 || position < 0 || position + rows > L) {
    throw new CanaryArgumentError(`rows [${position}, ${position + rows}) are outside the canary's ${L} positions`)
  }
  return data.subarray(position * dim, (position + rows) * dim)
}

/** The reference output rows [position, position+rows) after span [boundary, end) (a view). */
export function referenceFor(set: CanarySet, index: number, end: number, position: number, rows = 1): Float32Array {
  return rowsOf(canaryAt(set, index).outputs[endIndex(set, end)], set.dim, position, rows)
}

/** The canary input rows [position, position+rows) at the boundary (a view). */
export function inputFor(set: CanarySet, index: number, position: number, rows = 1): Float32Array {
  return rowsOf(canaryAt(set, index).inputs, set.dim, position, rows)
}
