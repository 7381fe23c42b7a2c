import type { AbortOptions } from '@libp2p/interface'
import {
  compileSchema,
  createConstraint,
  createEdge,
  createLocalPipeline,
  createShard,
  createTokenizer,
  generateTokens,
  type KernelKind,
  type Kernels,
  type KvDType,
  openModelFile,
  selectKernelsFor,
  TokenizerMismatchError
} from '../../../../shards/index.js'
import { progress } from '../../../log.js'
import { chatPrompt } from '../../chat-prompt.js'
import { checkContextLength } from '../checks.js'

/** Prompts at least this long get a prefill progress bar (on a terminal). */
const LONG_PREFILL_ROWS = 64

export interface GenerateCommandOptions {
  model: string
  tokenizer?: string
  prompt: string
  maxTokens: number
  temperature: number
  topK: number
  topP: number
  seed: number
  repetitionPenalty: number
  /** --json-schema: the output is JSON matching it (constrained sampling). */
  schema?: object
  json: boolean
  /** A kernel set to use (the caller closes it); otherwise one is made from kernelKind/threads. */
  kernels?: Kernels
  /** Kernel set to select when `kernels` is not given (default auto: native+WebAssembly when available). */
  kernelKind?: KernelKind
  /** Kernel threads (default: all cores). */
  threads?: number
  kvDType?: KvDType
  /** Wrap the prompt in the model's chat template (one user turn). */
  chat?: boolean
}

export interface GenerateResult {
  model: string
  promptTokens: number[]
  tokens: number[]
  /** The prompt and the completion, as llama2.c prints them. */
  text: string
  completion: string
  seed: number
  kernels: string
  stats: { loadMs: number; prefillMs: number; decodeMs: number; decodeTokensPerSecond: number }
}

/** `layerswarm generate` without a swarm: the whole model in this process. */
export async function runLocalGenerate(
  o: GenerateCommandOptions,
  write: (text: string) => void,
  { signal }: AbortOptions = {}
): Promise<GenerateResult> {
  const t0 = performance.now()
  const model = openModelFile(o.model, o.tokenizer !== undefined ? { tokenizerPath: o.tokenizer } : {})
  // Kernels made here are closed here, so their worker threads never outlive the command.
  const own = o.kernels ? null : selectKernelsFor(model.config, { kind: o.kernelKind ?? 'auto', threads: o.threads })
  const kernels = o.kernels ?? own ?? undefined
  try {
    if (!model.vocabulary) {
      throw new TokenizerMismatchError(`${o.model} holds no tokenizer; pass --tokenizer PATH (a llama2.c tokenizer.bin)`)
    }
    const tokenizer = createTokenizer(model.vocabulary)
    const { prompt, special } = o.chat ? chatPrompt(model.metadata, tokenizer, o.prompt) : { prompt: o.prompt, special: false }
    const promptTokens = tokenizer.encode(prompt, { special })
    checkContextLength(promptTokens.length, model.config.seqLen)
    const edge = createEdge({ model, kernels })
    const bar = progress('loading blocks', model.config.nLayers, { unit: 'blocks' }) // draws only on a terminal
    const shard = createShard({
      model,
      start: 0,
      end: model.config.nLayers,
      kernels,
      kvDType: o.kvDType,
      onProgress: (n) => bar.update(n)
    })
    bar.done()
    const room = model.config.seqLen - promptTokens.length
    const maxTokens = Math.max(0, Math.min(o.maxTokens, room))
    // A long prompt is one batched step: show it block by block on a terminal.
    let prefill: ReturnType<typeof progress> | undefined
    const pipeline = createLocalPipeline([shard], 'local', Math.min(model.config.seqLen, promptTokens.length + maxTokens), {
      onBlock: (done, total, rows) => {
        if (rows < LONG_PREFILL_ROWS) return
        prefill ??= progress(`prefill ${rows} tokens`, total, { unit: 'blocks' })
        prefill.update(done)
        if (done === total) {
          prefill.done()
          prefill = undefined
        }
      }
    })
    const decoder = tokenizer.createDecoder()
    let text = ''
    const emit = (piece: string): void => {
      text += piece
      if (!o.json) write(piece)
    }
    promptTokens.forEach((id, i) => {
      emit(decoder.push(id, i > 0 ? promptTokens[i - 1] : -1))
    })
    const loadMs = performance.now() - t0
    const tokens: number[] = []
    let prev = promptTokens[promptTokens.length - 1]
    let tFirst = 0
    const tStart = performance.now()
    for await (const id of generateTokens({
      edge,
      pipeline,
      promptTokens,
      maxTokens,
      stopIds: tokenizer.stopIds,
      temperature: o.temperature,
      topK: o.topK,
      topP: o.topP,
      seed: o.seed,
      repetitionPenalty: o.repetitionPenalty,
      ...(o.schema ? { constraint: createConstraint(tokenizer, compileSchema(o.schema)).start() } : {}),
      signal
    })) {
      if (tokens.length === 0) tFirst = performance.now()
      tokens.push(id)
      emit(decoder.push(id, prev))
      prev = id
    }
    emit(decoder.flush())
    const tEnd = performance.now()
    await pipeline.close()
    const decodeMs = tokens.length > 1 ? tEnd - tFirst : 0
    const completion = tokenizer.decode(tokens)
    return {
      model: o.model,
      promptTokens,
      tokens,
      text,
      completion,
      seed: o.seed,
      kernels: edge.kernels.name,
      stats: {
        loadMs: round(loadMs),
        prefillMs: round((tFirst || tEnd) - tStart),
        decodeMs: round(decodeMs),
        decodeTokensPerSecond: decodeMs > 0 ? round(((tokens.length - 1) * 1000) / decodeMs) : 0
      }
    }
  } finally {
    model.close()
    own?.close?.()
  }
}

function round(x: number): number {
  return Math.round(x * 100) / 100
}
