import { statSync } from 'node:fs'
import { EngineError, InvalidArgumentError, InvalidModelError } from '../errors.js'
import { ggufTensorKey, llamaDefaults } from '../model/architectures.js'
import { type GgufValue, type ModelFile, sampleRange } from '../model/model-file.js'
import { quantizeRow, rowBytes } from '../quant/codecs.js'
import { isModelFileType, MODEL_FILE_TYPES, type ModelFileType, tensorTypeFor } from '../quant/file-types.js'
import { withTokenizerMetadata } from '../tokenizers/vocab-packages.js'
import { BLOCK_TENSORS, type BlockTensor, type ModelConfig, type TensorName, type WeightDType } from '../types.js'
import { type GgufTypedValue, ggufPlainValue } from './gguf-values.js'
import { llamaGgufMetadata, writeGguf } from './gguf-writer.js'
import { type ArchSpec, archBlockVectors, archConfig, archGlobalVectors, archMetadata, PLAIN_LLAMA } from './random-arch.js'
import { moeTensorNames, storedTensors } from './random-fused.js'

// Random-weight Llama models for tests and benchmarks: the same seed gives the same weights
// in memory (createRandomModel) and on disk (writeRandomModel, GGUF as llama.cpp lays out a
// `general.architecture = llama` model), so a test can compare the two byte for byte.

export { MIN_VOCAB_SIZE, MODEL_SHAPES, type ModelShape, parseShape, validateShape } from './random-shapes.js'
export { syntheticVocabulary } from './random-vocab.js'

import { type ModelShape, validateShape } from './random-shapes.js'
import { syntheticVocabulary } from './random-vocab.js'

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
      // A mixture's FFN is its router and experts (random-fused.ts).
      if (c.moe && t.startsWith('ffn_') && t !== 'ffn_norm') continue
      out.push(m(`blk.${l}.${t}`, ...block[t]))
      if (t === 'attn_v') out.push(...archBlockVectors(c, l).map(vec))
      // The shared expert's gate vector is a dot-product row, filled as a bias (±0.5), not as a norm.
      if (t === 'ffn_norm')
        out.push(
          ...moeTensorNames(c, l).map(([n, rows, cols]) =>
            rows ? m(n, rows, cols) : vec({ name: n, length: cols, fill: 'bias' })
          )
        )
    }
  }
  out.push(m('output_norm', 0, c.dim))
  if (!c.tiedEmbeddings) out.push(m('output', c.vocabSize, c.dim))
  return out
}

const router = (name: string): boolean => name.endsWith('.ffn_gate_inp')

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
  const typed = llamaTensors(config).map((t) => ({
    ...t,
    // The MoE router stays F32, as llama-quantize leaves ffn_gate_inp; its rows are scaled up
    // so that each token's top experts stand clear (routing near-ties are not the point).
    dtype: t.vector || router(t.name) ? ('f32' as const) : tensorTypeFor(fileType, t.name, t.cols, config),
    scale: t.name === 'output' ? (s.outputScale ?? 1) : router(t.name) ? 4 : 1
  }))
  // A fused or stacked tensor has one storage type: its parts take the first part's.
  const dtypeOf = new Map(storedTensors(config, typed, ggufTensorKey).flatMap((g) => g.parts.map((p) => [p.name, g.dtype])))
  const tensors = typed.map((t) => ({ ...t, dtype: dtypeOf.get(t.name) ?? t.dtype }))
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
  const { config, metadata, tensors } = prepare(s, opts)
  let written = 0
  // phi3's fused and MoE's stacked tensors are written joined (random-fused.ts).
  const stored = storedTensors(config, tensors, ggufTensorKey)
  writeGguf(path, {
    metadata,
    tensors: stored.map((st) => ({
      name: st.key,
      // 1-D norm weights stay F32, as llama.cpp keeps them in every file type.
      dtype: st.dtype,
      shape: st.shape,
      data: () => {
        const parts = st.parts.map((t) => generateTensor(opts.seed, t, st.dtype, t.scale))
        opts.onProgress?.(++written, stored.length)
        return parts.length === 1 ? parts[0] : Buffer.concat(parts)
      }
    }))
  })
  return { bytes: statSync(path).size }
}
