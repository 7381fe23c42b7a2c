import { mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { type Command, InvalidArgumentError as CommanderArgError, Option } from 'commander'
import {
  type Architecture,
  type ArchSpec,
  loadPackageVocabulary,
  MODEL_FILE_TYPES,
  type ModelConfig,
  type ModelFileType,
  openModelFile,
  parseShape,
  RangedFile,
  readGgufHeader,
  type VocabPackageName,
  writeRandomModel
} from '../../../shards/index.js'

export interface MakeModelOptions {
  readonly shape: string
  readonly dtype: ModelFileType
  readonly seed: number
  readonly out: string
  readonly context?: number
  /** A real vocabulary (llama3, qwen: byte-level BPE from npm packages) or spm512 (synthetic SentencePiece, 512 pieces); its size overrides the shape's. */
  readonly vocab?: VocabPackageName | 'spm512'
  /** Model family and RoPE options (default: plain Llama 2). */
  readonly arch?: ArchSpec
}

export interface MakeModelResult {
  readonly out: string
  readonly shape: string
  readonly dtype: ModelFileType
  readonly seed: number
  readonly bytes: number
  /** Matrices per storage type (a Q4_K_M file holds Q4_K and Q6_K, and Q5_0/Q8_0 on short rows). */
  readonly tensorTypes: Record<string, number>
  readonly params: number
  readonly config: Record<string, unknown>
  readonly ms: number
}

/**
 * Write a random-weight Llama GGUF (shards/formats/random-model.ts) and read its header back, so a
 * file this prints a summary for is one the engine opens. `onProgress` sees tensors written.
 */
export function runMakeModel(o: MakeModelOptions, onProgress?: (done: number, total: number) => void): MakeModelResult {
  const t0 = performance.now()
  const parsed = parseShape(o.shape)
  const real = o.vocab && o.vocab !== 'spm512' ? loadPackageVocabulary(o.vocab) : undefined
  const vocabSize = real ? real.tokens.length : o.vocab === 'spm512' ? 512 : parsed.vocabSize
  const shape = vocabSize === parsed.vocabSize ? parsed : { ...parsed, name: `${parsed.name}+${o.vocab}`, vocabSize }
  const out = resolve(o.out)
  mkdirSync(dirname(out), { recursive: true })
  const { bytes } = writeRandomModel(out, shape, {
    dtype: o.dtype,
    seed: o.seed,
    seqLen: o.context,
    tokenizerMetadata: real?.metadata,
    arch: o.arch,
    onProgress
  })
  const tensorTypes: Record<string, number> = {}
  const file = new RangedFile(out)
  try {
    for (const t of readGgufHeader(file).tensors.values())
      if (t.ne.length >= 2) tensorTypes[t.dtype] = (tensorTypes[t.dtype] ?? 0) + 1
  } finally {
    file.close()
  }
  const model = openModelFile(out)
  try {
    const c = model.config
    const params =
      c.vocabSize * c.dim * (c.tiedEmbeddings ? 1 : 2) +
      c.dim +
      c.nLayers *
        (2 * c.dim +
          2 * c.qDim * c.dim +
          2 * c.kvDim * c.dim +
          ffnParams(c) +
          (c.qkvBias ? c.qDim + 2 * c.kvDim : 0) +
          (c.qkNorm ? 2 * c.headDim : 0)) +
      (c.ropeFreqFactors?.length ?? 0)
    return {
      out,
      shape: shape.name,
      dtype: o.dtype,
      seed: o.seed,
      bytes,
      tensorTypes,
      params,
      config: { ...c },
      ms: Math.round(performance.now() - t0)
    }
  } finally {
    model.close()
  }
}

function int(name: string, min: number) {
  return (v: string): number => {
    const n = Number(v)
    if (!Number.isSafeInteger(n) || n < min) throw new CommanderArgError(`${name} must be an integer ≥ ${min}`)
    return n
  }
}

function positive(name: string) {
  return (v: string): number => {
    const n = Number(v)
    if (!(n > 0 && Number.isFinite(n))) throw new CommanderArgError(`${name} must be a positive number`)
    return n
  }
}

/** `layerswarm make-model`: benchmark models (issue 3), loadable by this engine and llama.cpp. */
export function registerMakeModel(program: Command): void {
  program
    .command('make-model')
    .description(
      'Write a random-weight llama, qwen2 or qwen3 GGUF with a synthetic SentencePiece vocabulary, or a real one with --vocab (for benchmarks and tests).'
    )
    .requiredOption('--shape <shape>', 'tiny, 15m, 42m, 110m, 1.1b, 8b, or dim,layers,heads,kvHeads,ffn,vocab[,tied|untied]')
    .addOption(
      new Option('--dtype <dtype>', "file type: one storage type for every matrix, or llama.cpp's Q4_K_M / Q5_K_M mixture")
        .choices([...MODEL_FILE_TYPES])
        .default('f32')
    )
    .addOption(new Option('--seed <s>', 'random seed').argParser(int('--seed', 0)).default(1))
    .requiredOption('--out <file>', 'output .gguf file')
    .addOption(
      new Option(
        '--vocab <vocab>',
        "vocabulary: llama3 or qwen (the real tokenizers, llama.cpp's gpt2 layout), spm512 (synthetic SentencePiece); sets the vocab size"
      ).choices(['llama3', 'qwen', 'spm512'])
    )
    .addOption(new Option('--context <n>', 'context length written to <arch>.context_length').argParser(int('--context', 1)))
    .addOption(
      new Option('--arch <arch>', 'general.architecture')
        .choices(['llama', 'qwen2', 'qwen3', 'gemma2', 'gemma3', 'phi3', 'qwen3moe', 'qwen2moe'])
        .default('llama')
    )
    .addOption(
      new Option('--rope-dims <n>', 'partial rotary: RoPE rotates this many dims of each head (phi3, qwen*)').argParser(
        int('--rope-dims', 2)
      )
    )
    .addOption(new Option('--longrope', 'phi3: longrope short/long factors and attn factor'))
    .addOption(
      new Option(
        '--experts <count,used,ffn[,shared]>',
        'qwen3moe, qwen2moe (default 8,2,64), llama (a Mixtral file): experts, experts per token, expert FFN size; qwen2moe: shared expert FFN size (default 4 × ffn)'
      )
    )
    .addOption(
      new Option('--head-dim <n>', 'qwen3, qwen3moe, gemma: head size independent of dim / heads').argParser(int('--head-dim', 2))
    )
    .addOption(
      new Option(
        '--sliding-window <n>',
        'gemma: sliding window of the local layers (gemma2 default 4096, gemma3 none)'
      ).argParser(int('--sliding-window', 1))
    )
    .addOption(
      new Option('--swa-pattern <n>', 'gemma: layer period of the sliding window (2 / 6)').argParser(int('--swa-pattern', 1))
    )
    .addOption(new Option('--rope-theta <θ>', 'RoPE base (rope.freq_base, default 10000)').argParser(positive('--rope-theta')))
    .addOption(
      new Option('--rope-scaling <kind>', 'llama3 (writes rope_freqs) or linear')
        .choices(['none', 'llama3', 'linear'])
        .default('none')
    )
    .addOption(
      new Option('--rope-scaling-factor <f>', 'scaling factor (llama3: 8, linear: 2)').argParser(
        positive('--rope-scaling-factor')
      )
    )
    .action((opts) => {
      const arch: ArchSpec = {
        architecture: opts.arch as Architecture,
        headDim: opts.headDim,
        ropeTheta: opts.ropeTheta,
        ropeScaling: opts.ropeScaling,
        ropeScalingFactor: opts.ropeScalingFactor,
        slidingWindow: opts.slidingWindow,
        swaPattern: opts.swaPattern,
        ropeDims: opts.ropeDims,
        longrope: opts.longrope,
        experts:
          opts.arch === 'qwen3moe' || opts.arch === 'qwen2moe'
            ? experts(opts.experts ?? '8,2,64')
            : opts.experts !== undefined
              ? experts(opts.experts)
              : undefined
      }
      const tty = process.stderr.isTTY === true
      const result = runMakeModel(
        { shape: opts.shape, dtype: opts.dtype, seed: opts.seed, out: opts.out, context: opts.context, arch, vocab: opts.vocab },
        tty
          ? (done, total) => process.stderr.write(`\rmake-model: ${done}/${total} tensors${done === total ? '\n' : ''}`)
          : undefined
      )
      process.stdout.write(`${JSON.stringify(result)}\n`)
    })
}

/** One block's FFN parameters: a mixture's router, all its experts and its shared expert. */
function ffnParams(c: ModelConfig): number {
  const m = c.moe
  if (!m) return 3 * c.hiddenDim * c.dim
  return m.nExperts * (1 + 3 * m.expertHidden) * c.dim + (m.sharedHidden > 0 ? (1 + 3 * m.sharedHidden) * c.dim : 0)
}

/** `--experts count,used,ffn[,shared]` (random-families.ts checks the numbers). */
function experts(v: string): { count: number; used: number; hidden: number; shared?: number } {
  const [count, used, hidden, shared] = v.split(',').map(Number)
  return { count, used, hidden, ...(shared !== undefined ? { shared } : {}) }
}
