import { statSync } from 'node:fs'
import { ggufTensorKey, llamaDefaults } from './architectures.js'
import { EngineError, InvalidArgumentError, InvalidModelError } from './errors.js'
import { type GgufTypedValue, ggufPlainValue, llamaGgufMetadata, writeGguf } from './gguf-writer.js'
import { type GgufValue, type ModelFile, sampleRange } from './model-file.js'
import { isModelFileType, MODEL_FILE_TYPES, type ModelFileType, tensorTypeFor } from './quant/file-types.js'
import { quantizeRow, rowBytes } from './quant.js'
import { type ArchSpec, archBlockVectors, archConfig, archGlobalVectors, archMetadata, PLAIN_LLAMA } from './random-arch.js'
import { BLOCK_TENSORS, type BlockTensor, type ModelConfig, type TensorName, type Vocabulary, type WeightDType } from './types.js'
import { withTokenizerMetadata } from './vocab-packages.js'

// Random-weight Llama models for tests and benchmarks: the same seed gives the same weights
// in memory (createRandomModel) and on disk (writeRandomModel, GGUF as llama.cpp lays out a
// `general.architecture = llama` model), so a test can compare the two byte for byte.

/** The hyper-parameters a random model is built from (see randomModelConfig). */
export interface ModelShape {
  readonly name: string
  readonly dim: number
  readonly nLayers: number
  readonly nHeads: number
  readonly nKvHeads: number
  readonly hiddenDim: number
  readonly vocabSize: number
  /** LM head shares token_embd (no output.weight). */
  readonly tied: boolean
  /** Default context length. */
  readonly seqLen: number
  /** RoPE base frequency (default 10000). */
  readonly ropeTheta?: number
  /**
   * Factor on the LM head's random weights (untied shapes only; default 1). Logits of a head
   * uniform in ±1/√dim have a standard deviation near 0.58 over the vocabulary, so with 128k
   * tokens the top two are typically a tenth of a logit apart; ×14 gives about 8, so greedy
   * decoding has clear margins and implementations that differ by rounding pick the same token.
   */
  readonly outputScale?: number
}

const shape = (
  name: string,
  dim: number,
  nLayers: number,
  nHeads: number,
  nKvHeads: number,
  hiddenDim: number,
  vocabSize: number,
  tied: boolean,
  seqLen: number,
  extra: { ropeTheta?: number; outputScale?: number } = {}
): ModelShape => ({ name, dim, nLayers, nHeads, nKvHeads, hiddenDim, vocabSize, tied, seqLen, ...extra })

/**
 * 15m/42m/110m are llama2.c's TinyStories configs, 1.1b is TinyLlama-1.1B, 8b is Llama-3-8B's
 * shape (GQA 32/8 heads, 128256-token vocabulary, RoPE θ 500000) with a peaked LM head.
 */
export const MODEL_SHAPES: Readonly<Record<string, ModelShape>> = {
  tiny: shape('tiny', 64, 3, 4, 2, 96, 300, false, 128),
  '15m': shape('15m', 288, 6, 6, 6, 768, 32000, true, 256),
  '42m': shape('42m', 512, 8, 8, 8, 1376, 32000, true, 1024),
  '110m': shape('110m', 768, 12, 12, 12, 2048, 32000, true, 1024),
  '1.1b': shape('1.1b', 2048, 22, 32, 4, 5632, 32000, false, 2048),
  '8b': shape('8b', 4096, 32, 32, 8, 14336, 128256, false, 2048, { ropeTheta: 500000, outputScale: 14 })
}

/** 3 specials and 256 byte tokens, plus at least one normal piece. */
export const MIN_VOCAB_SIZE = 260
const CUSTOM_SEQ_LEN = 512 // default context of a "dim,layers,..." shape

/** Throws InvalidArgumentError unless the shape is one a Llama forward pass can run. */
export function validateShape(s: ModelShape): void {
  for (const f of ['dim', 'nLayers', 'nHeads', 'nKvHeads', 'hiddenDim', 'vocabSize', 'seqLen'] as const) {
    if (!Number.isSafeInteger(s?.[f]) || s[f] < 1)
      throw new InvalidArgumentError(`shape ${f} must be a positive integer, got ${s?.[f]}`)
  }
  if (s.dim % s.nHeads !== 0) throw new InvalidArgumentError(`dim ${s.dim} is not a multiple of heads ${s.nHeads}`)
  if (s.nHeads % s.nKvHeads !== 0) throw new InvalidArgumentError(`heads ${s.nHeads} is not a multiple of kvHeads ${s.nKvHeads}`)
  // RoPE rotates pairs of dimensions within a head.
  if ((s.dim / s.nHeads) % 2 !== 0) throw new InvalidArgumentError(`head size ${s.dim / s.nHeads} must be even for RoPE`)
  if (s.vocabSize < MIN_VOCAB_SIZE)
    throw new InvalidArgumentError(`vocab ${s.vocabSize} is below ${MIN_VOCAB_SIZE} (specials + 256 byte tokens)`)
  if (typeof s.tied !== 'boolean') throw new InvalidArgumentError('shape tied must be a boolean')
}

/** A shape name (MODEL_SHAPES) or "dim,layers,heads,kvHeads,ffn,vocab[,tied|untied]" (untied by default). */
export function parseShape(spec: string): ModelShape {
  if (typeof spec !== 'string') throw new InvalidArgumentError('shape spec must be a string')
  const key = spec.trim().toLowerCase()
  if (Object.hasOwn(MODEL_SHAPES, key)) return MODEL_SHAPES[key]
  const parts = spec.split(',').map((p) => p.trim())
  if (parts.length !== 6 && parts.length !== 7) {
    throw new InvalidArgumentError(
      `unknown shape "${spec}": use one of ${Object.keys(MODEL_SHAPES).join(', ')} or dim,layers,heads,kvHeads,ffn,vocab[,tied]`
    )
  }
  const names = ['dim', 'layers', 'heads', 'kvHeads', 'ffn', 'vocab']
  const nums = parts.slice(0, 6).map((p, i) => {
    if (!/^0*[1-9]\d{0,8}$/.test(p))
      throw new InvalidArgumentError(`shape "${spec}": ${names[i]} "${p}" is not a positive integer`)
    return Number(p)
  })
  const tiedWord = parts[6] ?? 'untied'
  if (tiedWord !== 'tied' && tiedWord !== 'untied')
    throw new InvalidArgumentError(`shape "${spec}": 7th field must be tied or untied`)
  const [dim, nLayers, nHeads, nKvHeads, hiddenDim, vocabSize] = nums
  const s = shape(parts.join(','), dim, nLayers, nHeads, nKvHeads, hiddenDim, vocabSize, tiedWord === 'tied', CUSTOM_SEQ_LEN)
  validateShape(s)
  return s
}

// Fry's first 100 words and a few story words; with every prefix added, SentencePiece's
// greedy pair merging can actually reach each word from its letters.
const WORDS = (
  'the of and a to in is you that it he was for on are as with his they I at be this have from or one had by ' +
  'word but not what all were we when your can said there use an each which she do how their if will up other about out ' +
  'many then them these so some her would make like him into time has look two more write go see number no way could ' +
  'people my than first water been call who oil its now find long down day did get come made may part once upon little ' +
  'girl boy happy story hello world'
).split(' ')

/**
 * A SentencePiece (llama) vocabulary of exactly `vocabSize` pieces: <unk>, <s>, </s>, the 256
 * byte-fallback tokens <0x00>..<0xFF> at ids 3..258 (as Llama's tokenizer.model), then normal
 * pieces with strictly decreasing scores. Deterministic; all pieces are distinct.
 */
export function syntheticVocabulary(vocabSize: number): Vocabulary {
  if (!Number.isSafeInteger(vocabSize) || vocabSize < MIN_VOCAB_SIZE) {
    throw new InvalidArgumentError(`vocabulary size must be an integer >= ${MIN_VOCAB_SIZE}, got ${vocabSize}`)
  }
  const pieces = ['<unk>', '<s>', '</s>']
  for (let b = 0; b < 256; b++) pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)
  const normal = new Set<string>()
  // Every special and byte token looks like <...>; no normal piece does, so only normal ones can repeat.
  const add = (p: string): void => {
    if (pieces.length + normal.size < vocabSize) normal.add(p)
  }
  // Most useful first, so even a tiny vocabulary has letters and word starts.
  const lower = 'abcdefghijklmnopqrstuvwxyz'
  for (const c of ` ${lower}`) add(c)
  for (const c of lower) add(` ${c}`)
  for (let c = 0x21; c < 0x7f; c++) add(String.fromCharCode(c))
  for (const c of lower.toUpperCase()) add(` ${c}`)
  for (const w of WORDS) {
    for (let k = 2; k <= w.length; k++) {
      add(w.slice(0, k))
      add(` ${w.slice(0, k)}`)
    }
  }
  for (let n = 0; pieces.length + normal.size < vocabSize; n++) add(` tok${n}`)
  const nSpecial = pieces.length
  for (const p of normal) pieces.push(p) // not push(...normal): 128K arguments overflow the stack (8b vocab)
  const scores = new Float32Array(vocabSize)
  const types = new Int32Array(vocabSize)
  types.set([2, 3, 3]) // <unk> unknown, <s> and </s> control
  types.fill(6, 3, nSpecial) // byte
  types.fill(1, nSpecial) // normal
  for (let i = nSpecial; i < vocabSize; i++) scores[i] = -(i - nSpecial)
  return { pieces, scores, types, bosId: 1, eosId: 2, unkId: 0, stopIds: [2] }
}

/**
 * The ModelConfig of a shape. ropeTheta and rmsEps are rounded to f32 because GGUF stores
 * them as f32, so a model read back from its file has exactly this config.
 */
export function randomModelConfig(
  s: ModelShape,
  opts: { seqLen?: number; ropeTheta?: number; rmsEps?: number } = {}
): ModelConfig {
  validateShape(s)
  const seqLen = opts.seqLen ?? s.seqLen
  const ropeTheta = opts.ropeTheta ?? s.ropeTheta ?? 10000
  const rmsEps = opts.rmsEps ?? 1e-5
  if (!Number.isSafeInteger(seqLen) || seqLen < 1)
    throw new InvalidArgumentError(`seqLen must be a positive integer, got ${seqLen}`)
  if (!(ropeTheta > 0 && Number.isFinite(ropeTheta)))
    throw new InvalidArgumentError(`ropeTheta must be positive, got ${ropeTheta}`)
  if (!(rmsEps > 0 && Number.isFinite(rmsEps))) throw new InvalidArgumentError(`rmsEps must be positive, got ${rmsEps}`)
  const headDim = s.dim / s.nHeads
  return {
    architecture: 'llama',
    dim: s.dim,
    hiddenDim: s.hiddenDim,
    nLayers: s.nLayers,
    nHeads: s.nHeads,
    nKvHeads: s.nKvHeads,
    headDim,
    kvDim: s.nKvHeads * headDim,
    vocabSize: s.vocabSize,
    seqLen,
    ropeTheta: Math.fround(ropeTheta),
    rmsEps: Math.fround(rmsEps),
    tiedEmbeddings: s.tied,
    ...llamaDefaults(headDim, s.nHeads)
  }
}

/** [rows, cols] of a matrix; a vector (a norm weight) has rows = 0 and its length in cols. */
type TensorSpec = {
  readonly name: TensorName
  readonly rows: number
  readonly cols: number
  readonly vector: boolean
  /** Vectors other than norm weights (random-arch.ts ExtraVector.fill). */
  readonly fill?: 'bias' | 'norm' | readonly number[]
}

/** llama.cpp's tensor order and shapes (WeightMatrix [rows, cols] = GGUF ne [cols, rows]). */
function llamaTensors(c: ModelConfig): TensorSpec[] {
  const m = (name: TensorName, rows: number, cols: number): TensorSpec => ({ name, rows, cols, vector: rows === 0 })
  const block: Record<BlockTensor, [rows: number, cols: number]> = {
    attn_norm: [0, c.dim],
    attn_q: [c.qDim, c.dim],
    attn_k: [c.kvDim, c.dim],
    attn_v: [c.kvDim, c.dim],
    attn_output: [c.dim, c.qDim],
    ffn_norm: [0, c.dim],
    ffn_gate: [c.hiddenDim, c.dim],
    ffn_up: [c.hiddenDim, c.dim],
    ffn_down: [c.dim, c.hiddenDim]
  }
  const vec = (e: { name: TensorName; length: number; fill: TensorSpec['fill'] }): TensorSpec => ({
    name: e.name,
    rows: 0,
    cols: e.length,
    vector: true,
    fill: e.fill
  })
  const out = [...archGlobalVectors(c).map(vec), m('token_embd', c.vocabSize, c.dim)]
  for (let l = 0; l < c.nLayers; l++) {
    for (const t of BLOCK_TENSORS) {
      out.push(m(`blk.${l}.${t}`, ...block[t]))
      if (t === 'attn_v') out.push(...archBlockVectors(c, l).map(vec))
    }
  }
  out.push(m('output_norm', 0, c.dim))
  if (!c.tiedEmbeddings) out.push(m('output', c.vocabSize, c.dim))
  return out
}

/** An independent xorshift32 stream per (seed, tensor), so tensors can be made in any order. */
function tensorSeed(seed: number, name: string): number {
  const big = BigInt(seed)
  let h = 0x811c9dc5 // FNV-1a over the name and the seed's two 32-bit halves
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193)
  h = Math.imul(h ^ Number(BigInt.asUintN(32, big)), 0x01000193)
  h = Math.imul(h ^ Number(BigInt.asUintN(32, big >> 32n)), 0x01000193)
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) // murmur3 fmix32 spreads the bits
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  h ^= h >>> 16
  return h === 0 ? 0x6d2b79f5 : h // xorshift's state must not be zero
}

/** Fill `out` with bias + uniform[-scale, scale) (Marsaglia xorshift32); returns the next state. */
function fillUniform(state: number, out: Float32Array, scale: number, bias: number): number {
  let x = state
  const k = scale * 2 ** -31
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = bias + x * k
  }
  return x
}

const CHUNK_ELEMENTS = 1 << 18

/**
 * A tensor's bytes. Matrices are uniform in ±scale/sqrt(cols), so each output of W x keeps
 * about the variance of x (divided by 3) times scale²; norm weights are 1 ± 0.1. Quantised
 * types are encoded (quantizeRow) in row chunks, so no full f32 copy of a big tensor is made.
 */
function generateTensor(seed: number, t: TensorSpec, dtype: WeightDType, scale = 1): Uint8Array {
  const state = tensorSeed(seed, t.name)
  if (Array.isArray(t.fill)) return new Uint8Array(Float32Array.from(t.fill).buffer)
  if (t.fill === 'bias') {
    const out = new Float32Array(t.cols)
    fillUniform(state, out, 0.5, 0)
    return new Uint8Array(out.buffer)
  }
  if (t.vector || dtype === 'f32') {
    const out = new Float32Array(t.vector ? t.cols : t.rows * t.cols)
    fillUniform(state, out, t.vector ? 0.1 : scale / Math.sqrt(t.cols), t.vector ? 1 : 0)
    return new Uint8Array(out.buffer)
  }
  const rb = rowBytes(dtype, t.cols)
  const out = new Uint8Array(rb * t.rows)
  const chunkRows = Math.max(1, Math.floor(CHUNK_ELEMENTS / t.cols))
  const buf = new Float32Array(chunkRows * t.cols)
  for (let r = 0, x = state; r < t.rows; r += chunkRows) {
    const n = Math.min(chunkRows, t.rows - r)
    const values = buf.subarray(0, n * t.cols)
    x = fillUniform(x, values, scale / Math.sqrt(t.cols), 0)
    for (let i = 0; i < n; i++) quantizeRow(dtype, values, i * t.cols, t.cols, out, (r + i) * rb)
  }
  return out
}

export interface RandomModelOptions {
  /** File type: one storage type for every matrix, or llama.cpp's Q4_K_M / Q5_K_M mixture. */
  readonly dtype: ModelFileType
  readonly seed: number
  readonly seqLen?: number
  /** tokenizer.* metadata to write instead of the synthetic vocabulary's (vocab-packages.ts). */
  readonly tokenizerMetadata?: ReadonlyArray<[string, GgufTypedValue]>
  /** Model family and RoPE options (random-arch.ts); a plain Llama 2 model when omitted. */
  readonly arch?: ArchSpec
}

function prepare(s: ModelShape, opts: RandomModelOptions) {
  if (!isModelFileType(opts?.dtype))
    throw new InvalidArgumentError(`dtype must be one of ${MODEL_FILE_TYPES.join(', ')}, got ${opts?.dtype}`)
  if (!Number.isSafeInteger(opts.seed)) throw new InvalidArgumentError(`seed must be a safe integer, got ${opts.seed}`)
  const config = archConfig(randomModelConfig(s, { seqLen: opts.seqLen }), opts.arch ?? PLAIN_LLAMA)
  const quantised = !['f32', 'f16', 'bf16'].includes(opts.dtype)
  if (quantised && (config.dim % 32 !== 0 || config.hiddenDim % 32 !== 0 || config.qDim % 32 !== 0)) {
    throw new InvalidArgumentError(
      `${opts.dtype} needs dim, heads*headDim and ffn to be multiples of 32 (got ${config.dim}, ${config.qDim}, ${config.hiddenDim})`
    )
  }
  const vocabulary = syntheticVocabulary(config.vocabSize)
  const name = `random ${config.architecture === 'llama' ? '' : `${config.architecture} `}${s.name} seed ${opts.seed}`
  const base = archMetadata(llamaGgufMetadata(name, config, vocabulary, opts.dtype), config)
  const metadata = opts.tokenizerMetadata ? withTokenizerMetadata(base, opts.tokenizerMetadata) : base
  const fileType = opts.dtype
  const tensors = llamaTensors(config).map((t) => ({
    ...t,
    dtype: t.vector ? ('f32' as const) : tensorTypeFor(fileType, t.name, t.cols, config),
    scale: t.name === 'output' ? (s.outputScale ?? 1) : 1
  }))
  return { config, vocabulary, metadata, tensors }
}

/**
 * An in-memory random model. Each tensor is generated on its first read and kept (returned
 * matrices share that buffer: do not modify them); `bytesRead` counts the bytes of every read,
 * as a file-backed ModelFile does, so tests can check a shard touched only its own tensors.
 */
export function createRandomModel(s: ModelShape, opts: RandomModelOptions): ModelFile {
  const { config, vocabulary, metadata, tensors } = prepare(s, opts)
  const specs = new Map(tensors.map((t) => [t.name as string, t]))
  const cache = new Map<string, Uint8Array>()
  const path = `memory:random-${config.architecture === 'llama' ? '' : `${config.architecture}-`}${s.name}-${opts.dtype}-seed${opts.seed}`
  let bytesRead = 0
  let closed = false
  const get = (name: TensorName, vector: boolean): { spec: (typeof tensors)[number]; data: Uint8Array } => {
    if (closed) throw new EngineError(`${path} is closed`)
    // As the GGUF and llama2.c readers do: a tied head reads as the embedding matrix.
    const spec = specs.get(name === 'output' && config.tiedEmbeddings ? 'token_embd' : name)
    if (spec === undefined) throw new InvalidModelError(`${path}: no tensor ${name}`)
    if (spec.vector !== vector) throw new InvalidArgumentError(`${path}: ${name} is a ${spec.vector ? 'vector' : 'matrix'}`)
    let data = cache.get(spec.name)
    if (data === undefined) {
      data = generateTensor(opts.seed, spec, spec.dtype, spec.scale)
      cache.set(spec.name, data)
    }
    bytesRead += data.length
    return { spec, data }
  }
  return {
    format: 'memory',
    path,
    config,
    vocabulary,
    metadata: new Map<string, GgufValue>(metadata.map(([k, v]) => [k, ggufPlainValue(v)])),
    weightDType: specs.get('blk.0.attn_q')?.dtype ?? 'f32',
    hasTensor: (name) => specs.has(name),
    readMatrix(name) {
      const { spec, data } = get(name, false)
      return { dtype: spec.dtype, rows: spec.rows, cols: spec.cols, data }
    },
    // Per-matrix storage types without generating data (a Q4_K_M mixture's attn_v may differ).
    matrixInfo(name) {
      const spec = specs.get(name === 'output' && config.tiedEmbeddings ? 'token_embd' : name)
      if (spec === undefined || spec.vector) throw new InvalidModelError(`${path}: no matrix ${name}`)
      return { dtype: spec.dtype, rows: spec.rows, cols: spec.cols }
    },
    readVector: (name) => new Float32Array(get(name, true).data.slice().buffer),
    sampleTensor(name, maxBytes) {
      const spec = specs.get(name === 'output' && config.tiedEmbeddings ? 'token_embd' : name)
      const { data } = get(name, spec?.vector ?? false)
      return sampleRange(data.length, maxBytes, (at, n) => data.slice(at, at + n))
    },
    bytesRead: () => bytesRead,
    close() {
      closed = true
      cache.clear()
    }
  }
}

/**
 * Write the model createRandomModel(shape, opts) describes as a GGUF file, generating one
 * tensor at a time (a 1.1b f32 model, 4.4 GB, never sits in memory). Returns the file size.
 */
export function writeRandomModel(
  path: string,
  s: ModelShape,
  opts: RandomModelOptions & { readonly onProgress?: (tensorsWritten: number, tensors: number) => void }
): { bytes: number } {
  const { metadata, tensors } = prepare(s, opts)
  let written = 0
  writeGguf(path, {
    metadata,
    tensors: tensors.map((t) => ({
      name: ggufTensorKey(t.name),
      // 1-D norm weights stay F32, as llama.cpp keeps them in every file type.
      dtype: t.dtype,
      shape: t.vector ? [t.cols] : [t.cols, t.rows],
      data: () => {
        const data = generateTensor(opts.seed, t, t.dtype, t.scale)
        opts.onProgress?.(++written, tensors.length)
        return data
      }
    }))
  })
  return { bytes: statSync(path).size }
}
