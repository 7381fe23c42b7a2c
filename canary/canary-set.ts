import type { AbortOptions } from '@libp2p/interface'
import {
  computeModelId,
  createReferenceKernels,
  createTokenizer,
  type Edge,
  type Kernels,
  type ModelFile,
  type Tokenizer
} from '../shards/index.js'
import { CanaryArgumentError } from './errors.js'
import { DEFAULT_CANARY_PROMPTS } from './prompts.js'
import { type CanaryTrace, createTracer, runInSlices, runNow } from './trace.js'

/** One canary: a real prompt, continued by the model, and its hidden states at the boundary (a view of its trace). */
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
  /**
   * Positions per canary, prompt plus sampled continuation: as long as the client's real sessions,
   * so a decoy can run as long as one (default DEFAULT_CANARY_LENGTH, capped by the model context).
   */
  readonly tokensPerPrompt?: number
  /** At most this many prompt tokens are kept (default MAX_CANARY_PROMPT_TOKENS), so there is a continuation. */
  readonly maxPromptTokens?: number
  /** Seed of the continuation sampler (temperature 1, as ordinary generation). */
  readonly seed?: number
  /** Called after each canary is built: (built, total); for progress bars. */
  readonly onProgress?: (built: number, total: number) => void
  /** The caller's tokenizer and edge (embeddings, head) on the same kernels, instead of new ones (issue 31). */
  readonly tokenizer?: Tokenizer
  readonly edge?: Edge
}

/** Positions per canary by default: the length of a client's default generation (256 tokens). */
export const DEFAULT_CANARY_LENGTH = 256

/** Prompt tokens a canary keeps at most by default, so there is a continuation. */
export const MAX_CANARY_PROMPT_TOKENS = 24

/** Canary traces of a model: every block boundary's states, for sets at any boundary. */
export interface CanaryTraces {
  readonly modelId: string
  readonly kernels: string
  readonly dim: number
  readonly nLayers: number
  readonly traces: readonly CanaryTrace[]
}

export type BuildCanaryTracesOptions = Omit<BuildCanarySetOptions, 'boundary' | 'ends'> & {
  /** Block boundaries whose states are kept (default all, 0..nLayers). */
  readonly levels?: readonly number[]
  /**
   * Per prompt, how a chat template made it (client/verification/canaries/canary-template.ts): kept whole (up to
   * tokensPerPrompt − 1), not cut at maxPromptTokens; with `special`, its control tokens are
   * encoded as such. Undefined entries: plain prompts.
   */
  readonly templated?: readonly ({ readonly special: boolean } | undefined)[]
  /**
   * Index of the first prompt in its set (default 0): prompt i is sampled with the seed of canary
   * firstIndex + i, so a grown set's new canaries are built alone, the same as with the rest.
   */
  readonly firstIndex?: number
}

const isInt = (x: unknown, min: number): x is number => Number.isInteger(x) && (x as number) >= min

/**
 * Canary traces: each prompt is tokenized (BOS first where the file adds one), cut to maxPromptTokens and continued by
 * sampling the whole model at temperature 1 on the trusted kernels (so the tokens are distributed
 * as ordinary generations) to tokensPerPrompt positions, keeping the hidden states at the block
 * boundaries asked for. Building again with the same options regenerates the same traces.
 */
export function buildCanaryTraces(options: BuildCanaryTracesOptions): CanaryTraces {
  return runNow(canaryTracesJob(options))
}

/** buildCanaryTraces in slices (runInSlices: one block of one lockstep step each), the event loop running between them. */
export async function buildCanaryTracesInSlices(
  options: BuildCanaryTracesOptions,
  abort: AbortOptions = {}
): Promise<CanaryTraces> {
  return await runInSlices(canaryTracesJob(options), abort)
}

/** buildCanaryTraces as a sliced job (canary/background-job.ts runs it between other work). */
export function buildCanaryTracesJob(options: BuildCanaryTracesOptions): Generator<void, CanaryTraces> {
  return canaryTracesJob(options)
}

function* canaryTracesJob(
  options: BuildCanaryTracesOptions,
  earlier: readonly CanaryTrace[] = []
): Generator<void, CanaryTraces> {
  const { model } = options
  if (!model || typeof model !== 'object' || !model.config) throw new CanaryArgumentError('building canaries needs a model')
  const n = model.config.nLayers
  const prompts = options.prompts ?? DEFAULT_CANARY_PROMPTS
  if (!Array.isArray(prompts) || prompts.length === 0 || prompts.some((p) => typeof p !== 'string' || p.length === 0)) {
    throw new CanaryArgumentError('prompts must be a non-empty list of non-empty strings')
  }
  const total = options.tokensPerPrompt ?? Math.min(DEFAULT_CANARY_LENGTH, model.config.seqLen)
  const maxPrompt = options.maxPromptTokens ?? MAX_CANARY_PROMPT_TOKENS
  if (!isInt(total, 2) || total > model.config.seqLen) {
    throw new CanaryArgumentError(`tokensPerPrompt must be an integer in [2, ${model.config.seqLen}]`)
  }
  if (!isInt(maxPrompt, 1) || maxPrompt > total) throw new CanaryArgumentError(`maxPromptTokens must be in [1, ${total}]`)
  const seed = options.seed ?? 1
  if (!Number.isSafeInteger(seed)) throw new CanaryArgumentError('seed must be a safe integer')
  const first = options.firstIndex ?? 0
  if (!isInt(first, 0)) throw new CanaryArgumentError('firstIndex must be an integer ≥ 0')
  const levels = options.levels ?? Array.from({ length: n + 1 }, (_, k) => k)
  if (!Array.isArray(levels) || levels.some((k) => !isInt(k, 0) || k > n))
    throw new CanaryArgumentError(`levels must be integers in [0, ${n}]`)
  if (!model.vocabulary) throw new CanaryArgumentError('the model file has no tokenizer vocabulary')
  const kernels = options.kernels ?? createReferenceKernels()
  const tracer = createTracer(model, kernels, options.tokenizer ?? createTokenizer(model.vocabulary), options.edge)
  try {
    // All canaries in lockstep (Tracer.traceAll): the same traces as one at a time, bit for bit,
    // with each weight read once per step for all of them instead of once per canary.
    const wanted = new Set(levels)
    let built = 0
    const traces = yield* tracer.traceJob(
      prompts.map((text, i) => {
        const t = options.templated?.[i]
        const special = t?.special === true
        const maxPromptTokens = t ? total - 1 : maxPrompt
        const from = earlier[i]
        return {
          text,
          length: total,
          maxPromptTokens,
          special,
          seed: seed * 1000 + first + i,
          levels: wanted,
          ...(from ? { from } : {})
        }
      }),
      () => options.onProgress?.(++built, prompts.length)
    )
    return { modelId: computeModelId(model), kernels: kernels.name, dim: model.config.dim, nLayers: n, traces }
  } finally {
    tracer.close()
  }
}

export type ExtendCanaryTracesOptions = Omit<
  BuildCanaryTracesOptions,
  'firstIndex' | 'levels' | 'tokensPerPrompt' | 'maxPromptTokens'
> & {
  /** The whole set: the first ones are those `traces` were built from. */
  readonly prompts: readonly string[]
  /** Positions per canary (default: as the traces'); longer continues every trace (TraceOptions.from). */
  readonly tokensPerPrompt?: number
}

/**
 * `traces` grown: canaries for the prompts past them, and every canary continued to
 * `tokensPerPrompt` positions when that is longer. Only what is new is computed (the old tokens
 * go through as one prefill), and the result equals a build of the whole set at that length, state
 * for state (canary i keeps its seed, a continued trace its tokens and sampler draws).
 */
export function extendCanaryTraces(traces: CanaryTraces, options: ExtendCanaryTracesOptions): CanaryTraces {
  return runNow(extendJob(traces, options))
}

/** extendCanaryTraces as a sliced job (canary/background-job.ts). */
export function extendCanaryTracesJob(traces: CanaryTraces, options: ExtendCanaryTracesOptions): Generator<void, CanaryTraces> {
  return extendJob(traces, options)
}

/** extendCanaryTraces in slices, the event loop running between them. */
export async function extendCanaryTracesInSlices(
  traces: CanaryTraces,
  options: ExtendCanaryTracesOptions,
  abort: AbortOptions = {}
): Promise<CanaryTraces> {
  return await runInSlices(extendJob(traces, options), abort)
}

function* extendJob(traces: CanaryTraces, options: ExtendCanaryTracesOptions): Generator<void, CanaryTraces> {
  const old = traces.traces.length
  const length = Math.min(...traces.traces.map((t) => t.tokens.length))
  const total = Math.max(length, options.tokensPerPrompt ?? length)
  if (options.prompts.length <= old && total === length) return traces
  const common = {
    ...options,
    tokensPerPrompt: total,
    maxPromptTokens: Math.min(MAX_CANARY_PROMPT_TOKENS, total),
    levels: traces.traces[0].states.flatMap((x, k) => (x ? [k] : []))
  }
  // longer: every canary again from its trace (a prefill of its tokens); else only the new ones
  if (total > length) return yield* canaryTracesJob(common, traces.traces)
  const added = yield* canaryTracesJob({
    ...common,
    prompts: options.prompts.slice(old),
    templated: options.templated?.slice(old),
    firstIndex: old
  })
  return { ...traces, traces: [...traces.traces, ...added.traces] }
}

function checkSpan(nLayers: number, boundary: number, endsIn: readonly number[] | undefined): number[] {
  if (!isInt(boundary, 0) || boundary >= nLayers) throw new CanaryArgumentError(`boundary ${boundary} must be in [0, ${nLayers})`)
  const ends = [...new Set(endsIn ?? [])].sort((a, b) => a - b)
  if (ends.length === 0 || ends.some((e) => !isInt(e, boundary + 1) || e > nLayers)) {
    throw new CanaryArgumentError(`ends must be a non-empty list of integers in (${boundary}, ${nLayers}]`)
  }
  return ends
}

/** The canary set at one boundary, as views of the traces' states (no copy). */
export function canarySetFromTraces(t: CanaryTraces, boundary: number, endsIn: readonly number[]): CanarySet {
  const ends = checkSpan(t.nLayers, boundary, endsIn)
  const canaries = t.traces.map((c): Canary => {
    const at = (k: number): Float32Array => {
      const s = c.states[k]
      if (!s) throw new CanaryArgumentError(`the canary traces hold no states at block boundary ${k}`)
      return s
    }
    return { text: c.text, tokens: c.tokens, promptLength: c.promptLength, inputs: at(boundary), outputs: ends.map(at) }
  })
  return { modelId: t.modelId, boundary, ends, dim: t.dim, kernels: t.kernels, canaries }
}

/**
 * A canary set for one model and one span boundary b: canary traces (buildCanaryTraces) cut to
 * the states entering block b (the inputs) and after every block e in `ends` (the references).
 */
export function buildCanarySet(options: BuildCanarySetOptions): CanarySet {
  const { model } = options
  if (!model || typeof model !== 'object' || !model.config) throw new CanaryArgumentError('buildCanarySet needs a model')
  const ends = checkSpan(model.config.nLayers, options.boundary, options.ends)
  return canarySetFromTraces(buildCanaryTraces({ ...options, levels: [options.boundary, ...ends] }), options.boundary, ends)
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
