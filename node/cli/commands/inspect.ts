import type { Command } from 'commander'
import { Option } from 'commander'
import type { FamilyParams, ModelConfig, MoeParams } from '../../../shards/index.js'
import {
  DEFAULT_KV_DTYPE,
  EngineError,
  type GgufValue,
  KV_DTYPES,
  type KvDType,
  kvRowBytes,
  openModelFile,
  RangedFile,
  readGgufHeader,
  type Vocabulary
} from '../../../shards/index.js'
import { defaultModelPath } from '../../paths.js'
import { int } from '../options.js'

export interface InspectOptions {
  readonly model: string
  readonly tokenizer?: string
  readonly kvDType: KvDType
  /** Context the KV cache is sized for (default: the model's). */
  readonly context?: number
}

export interface InspectResult {
  readonly model: string
  readonly format: string
  readonly architecture: string
  readonly name?: string
  readonly config: Record<string, unknown>
  readonly contextLength: number
  /** Tensors per storage type, with their bytes. */
  readonly tensorTypes: Record<string, { count: number; bytes: number }>
  readonly tokenizer?: {
    kind: string
    /** Why this engine cannot build it (the file still serves spans: nodes never tokenize). */
    error?: string
    pre?: string
    vocabSize: number
    bos: string
    eos: string
    stops: string[]
    addBos: boolean
  }
  readonly chatTemplate?: string
  /** What a node needs per block it serves: weights plus the KV cache of one session. */
  readonly perBlock: { weightBytes: number; kvBytes: number; kvDType: KvDType; context: number; totalBytes: number }
  /** Weights outside the blocks (embeddings, final norm, LM head): the client's share. */
  readonly edgeWeightBytes: number
}

/** A model's shapes, tensor types, tokenizer, chat template and per-block memory, without reading weights. */
export function runInspect(o: InspectOptions): InspectResult {
  const model = openModelFile(o.model, o.tokenizer !== undefined ? { tokenizerPath: o.tokenizer } : {})
  try {
    const c = model.config
    const context = o.context ?? c.seqLen
    const types: Record<string, { count: number; bytes: number }> = {}
    const blockBytes = new Map<number, number>()
    let edgeWeightBytes = 0
    const add = (name: string, dtype: string, bytes: number): void => {
      types[dtype] ??= { count: 0, bytes: 0 }
      types[dtype].count++
      types[dtype].bytes += bytes
      const block = /^blk\.(\d+)\./.exec(name)
      if (block) blockBytes.set(Number(block[1]), (blockBytes.get(Number(block[1])) ?? 0) + bytes)
      else edgeWeightBytes += bytes
    }
    if (model.format === 'gguf') {
      const file = new RangedFile(o.model)
      try {
        for (const t of readGgufHeader(file).tensors.values()) add(t.name, t.dtype, t.sizeBytes)
      } finally {
        file.close()
      }
    } else {
      const dt = model.weightDType
      const bytesOf = (rows: number, cols: number): number => rows * cols * (dt === 'f32' ? 4 : dt === 'f16' ? 2 : 34 / 32)
      for (let l = 0; l < c.nLayers; l++) {
        const m = 2 * c.dim * c.dim + 2 * c.kvDim * c.dim + 3 * c.hiddenDim * c.dim
        add(`blk.${l}.weights`, dt, bytesOf(1, m) + 2 * c.dim * 4)
      }
      add('token_embd', dt, bytesOf(c.vocabSize, c.dim) * (c.tiedEmbeddings ? 1 : 2))
    }
    const weightBytes = Math.max(0, ...blockBytes.values())
    // One session's K and V rows for every position of the context (kv-cache.ts layout).
    const kvBytes = 2 * context * kvRowBytes(o.kvDType, c.kvDim)
    let vocab: Vocabulary | undefined
    let vocabError: string | undefined
    try {
      vocab = model.vocabulary
    } catch (err) {
      if (!(err instanceof EngineError)) throw err
      vocabError = `${err.message} (${err.code})`
    }
    const meta = (k: string): GgufValue | undefined => model.metadata.get(k)
    const template = meta('tokenizer.chat_template')
    const tokenizer = vocab
      ? {
          kind: vocab.model ?? 'llama',
          ...(vocab.pre !== undefined ? { pre: vocab.pre } : {}),
          vocabSize: vocab.pieces.length,
          bos: vocab.pieces[vocab.bosId],
          eos: vocab.pieces[vocab.eosId],
          stops: vocab.stopIds.map((id) => vocab.pieces[id]),
          addBos: vocab.addBos ?? true
        }
      : vocabError !== undefined
        ? {
            kind: String(meta('tokenizer.ggml.model')),
            error: vocabError,
            vocabSize: 0,
            bos: '',
            eos: '',
            stops: [],
            addBos: false
          }
        : undefined
    const arch = meta('general.architecture')
    const name = meta('general.name')
    return {
      model: o.model,
      format: model.format,
      architecture: typeof arch === 'string' ? arch : 'llama',
      ...(typeof name === 'string' ? { name } : {}),
      config: { ...c },
      contextLength: c.seqLen,
      tensorTypes: types,
      ...(tokenizer ? { tokenizer } : {}),
      ...(typeof template === 'string' ? { chatTemplate: template } : {}),
      perBlock: { weightBytes, kvBytes, kvDType: o.kvDType, context, totalBytes: weightBytes + kvBytes },
      edgeWeightBytes
    }
  } finally {
    model.close()
  }
}

/** Partial rotary, scaling and magnitude of a config's RoPE (shards/model/rope-config.ts), as inspect prints them. */
function ropeExtras(config: InspectResult['config']): string {
  const c = config as unknown as ModelConfig
  const parts: string[] = []
  if (c.ropeDims !== undefined) parts.push(`rotary ${c.ropeDims} of ${c.headDim} dims`)
  if (c.ropeFreqScale !== 1) parts.push(`freq scale ${c.ropeFreqScale}`)
  if (c.ropeYarn) parts.push(`yarn ramp ${c.ropeYarn.corrLow}..${c.ropeYarn.corrHigh}`)
  if (c.ropeFreqFactors) parts.push(`${c.ropeFreqFactors.length} freq factors`)
  if (c.ropeMagnitude !== undefined) parts.push(`magnitude ${c.ropeMagnitude.toFixed(4)}`)
  return parts.length ? `, ${parts.join(', ')}` : ''
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(2)} MiB`
}

function print(r: InspectResult): string {
  const c = r.config
  const moe = c.moe as MoeParams | undefined
  const lines = [
    `model         ${r.model} (${r.format}${r.name ? `, "${r.name}"` : ''})`,
    `architecture  ${r.architecture}`,
    `shape         dim ${c.dim}, ${c.nLayers} blocks, ${c.nHeads} heads (${c.nKvHeads} kv), head ${c.headDim}, ffn ${c.hiddenDim}, vocab ${c.vocabSize}, ${c.tiedEmbeddings ? 'tied' : 'separate'} output`,
    `rope          θ ${c.ropeTheta}${ropeExtras(c)}`,
    ...(moe
      ? [
          `experts       ${moe.nUsed} of ${moe.nExperts} per token, expert ffn ${moe.expertHidden}${moe.normTopK ? ', top-k weights renormalised' : ''}${moe.sharedHidden > 0 ? `, shared expert ffn ${moe.sharedHidden} (sigmoid-gated)` : ''}`
        ]
      : []),
    ...(c.family ? [`family        ${familyLine(c.family as FamilyParams)}`] : []),
    `context       ${r.contextLength}`,
    `tensors       ${Object.entries(r.tensorTypes)
      .map(([t, v]) => `${t} ×${v.count} (${mib(v.bytes)})`)
      .join(', ')}`,
    r.tokenizer?.error
      ? `tokenizer     ${r.tokenizer.kind}: ${r.tokenizer.error}`
      : r.tokenizer
        ? `tokenizer     ${r.tokenizer.kind}${r.tokenizer.pre ? ` (pre ${r.tokenizer.pre})` : ''}, ${r.tokenizer.vocabSize} tokens, bos ${JSON.stringify(r.tokenizer.bos)}${r.tokenizer.addBos ? ' (added)' : ''}, stops ${r.tokenizer.stops.map((s) => JSON.stringify(s)).join(' ')}`
        : 'tokenizer     none in the file',
    `chat template ${r.chatTemplate ? `${r.chatTemplate.length} characters: ${JSON.stringify(r.chatTemplate.slice(0, 60))}…` : 'none (plain chat format)'}`,
    `per block     ${mib(r.perBlock.totalBytes)} = weights ${mib(r.perBlock.weightBytes)} + KV ${mib(r.perBlock.kvBytes)} (${r.perBlock.kvDType}, ${r.perBlock.context} positions, one session)`,
    `edge weights  ${mib(r.edgeWeightBytes)} (embeddings, output norm and head: the client's)`
  ]
  return `${lines.join('\n')}\n`
}

/** `layerswarm inspect`: what a model file holds and what serving it costs. */
export function registerInspect(program: Command): void {
  program
    .command('inspect')
    .description('Show a model file: architecture, shapes, tensor types, tokenizer, chat template, context, memory per block.')
    .option('--model <path>', 'model file (default: the bundled stories260K.gguf)')
    .option('--tokenizer <path>', 'tokenizer for llama2.c .bin models')
    .addOption(
      new Option('--kv-dtype <dtype>', 'KV cache storage for the memory estimate')
        .choices([...KV_DTYPES])
        .default(DEFAULT_KV_DTYPE)
    )
    .addOption(new Option('--context <n>', 'context for the KV estimate (default: the model’s)').argParser(int('--context', 1)))
    .option('--json', 'print one JSON object', false)
    .action((opts) => {
      const r = runInspect({
        model: opts.model ?? defaultModelPath(),
        tokenizer: opts.tokenizer,
        kvDType: opts.kvDtype,
        context: opts.context
      })
      process.stdout.write(opts.json ? `${JSON.stringify(r)}\n` : print(r))
    })
}

/** What the engine runs for Gemma 2 / 3 beyond the Llama block (shards/family-block.ts). */
function familyLine(f: FamilyParams): string {
  const parts = [`${f.ffnAct === 'gelu' ? 'GeGLU' : 'SwiGLU'}`, f.postNorms ? 'post-norms' : '', `embeddings ×${f.embedScale}`]
  if (f.attnSoftcap > 0) parts.push(`attention soft-cap ${f.attnSoftcap}`)
  if (f.finalSoftcap > 0) parts.push(`final soft-cap ${f.finalSoftcap}`)
  if (f.slidingWindow > 0) parts.push(`sliding window ${f.slidingWindow} (period ${f.swaPeriod}, local θ ${f.ropeThetaSwa})`)
  return parts.filter((p) => p !== '').join(', ')
}
