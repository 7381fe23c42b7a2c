import { InvalidModelError, UnsupportedModelError } from './errors.js'
import { f16Table } from './f16.js'
import { RangedFile } from './file-reader.js'
import { type GgufTensorInfo, readGgufHeader } from './gguf-reader.js'
import { type GgufValue, type ModelFile, sampleRange } from './model-file.js'
import { vocabularyFromGguf } from './tokenizer-files.js'
import type { ModelConfig, TensorName, Vocabulary } from './types.js'

function num(meta: ReadonlyMap<string, GgufValue>, key: string, path: string, fallback?: number): number {
  const v = meta.get(key)
  if (v === undefined) {
    if (fallback !== undefined) return fallback
    throw new InvalidModelError(`${path}: GGUF metadata has no ${key}`)
  }
  if (typeof v === 'number') return v
  if (typeof v === 'bigint') return Number(v)
  throw new InvalidModelError(`${path}: GGUF metadata ${key} is not a number`)
}

/** Llama hyper-parameters from `llama.*` keys (llama.cpp's llm_load_hparams). */
export function llamaConfigFromGguf(
  meta: ReadonlyMap<string, GgufValue>,
  tensors: ReadonlyMap<string, GgufTensorInfo>,
  path: string
): ModelConfig {
  const arch = meta.get('general.architecture')
  if (arch !== 'llama') {
    throw new UnsupportedModelError(`${path}: architecture ${JSON.stringify(arch)} is not supported (only "llama")`)
  }
  const dim = num(meta, 'llama.embedding_length', path)
  const nHeads = num(meta, 'llama.attention.head_count', path)
  const nKvHeads = num(meta, 'llama.attention.head_count_kv', path, nHeads)
  const embd = tensors.get('token_embd.weight')
  if (!embd) throw new InvalidModelError(`${path}: no token_embd.weight tensor`)
  const headDim = dim / nHeads
  if (!Number.isInteger(headDim) || headDim % 2 !== 0 || nHeads % nKvHeads !== 0) {
    throw new UnsupportedModelError(`${path}: ${dim} dims over ${nHeads} heads / ${nKvHeads} kv heads is not a valid Llama shape`)
  }
  const ropeDims = num(meta, 'llama.rope.dimension_count', path, headDim)
  if (ropeDims !== headDim)
    throw new UnsupportedModelError(`${path}: partial RoPE (${ropeDims} of ${headDim} dims) is not supported`)
  const config: ModelConfig = {
    architecture: 'llama',
    dim,
    hiddenDim: num(meta, 'llama.feed_forward_length', path),
    nLayers: num(meta, 'llama.block_count', path),
    nHeads,
    nKvHeads,
    headDim,
    kvDim: nKvHeads * headDim,
    vocabSize: embd.ne[1],
    seqLen: num(meta, 'llama.context_length', path),
    ropeTheta: num(meta, 'llama.rope.freq_base', path, 10000),
    rmsEps: num(meta, 'llama.attention.layer_norm_rms_epsilon', path, 1e-5),
    tiedEmbeddings: !tensors.has('output.weight')
  }
  if (embd.ne[0] !== dim) throw new InvalidModelError(`${path}: token_embd.weight is ${embd.ne} but the model has ${dim} dims`)
  return config
}

/** Expected [rows, cols] of every tensor the engine reads, to catch inconsistent files early. */
function expectedShape(name: string, c: ModelConfig): [number, number] | [number] | undefined {
  if (name === 'token_embd' || name === 'output') return [c.vocabSize, c.dim]
  if (name === 'output_norm') return [c.dim]
  const m = /^blk\.(\d+)\.(\w+)$/.exec(name)
  if (!m) return undefined
  switch (m[2]) {
    case 'attn_norm':
    case 'ffn_norm':
      return [c.dim]
    case 'attn_q':
    case 'attn_output':
      return [c.dim, c.dim]
    case 'attn_k':
    case 'attn_v':
      return [c.kvDim, c.dim]
    case 'ffn_gate':
    case 'ffn_up':
      return [c.hiddenDim, c.dim]
    case 'ffn_down':
      return [c.dim, c.hiddenDim]
  }
  return undefined
}

/** Open a GGUF model. Reads the header now and tensors on demand. */
export function openGgufModel(path: string): ModelFile {
  const file = new RangedFile(path)
  try {
    const header = readGgufHeader(file)
    const config = llamaConfigFromGguf(header.metadata, header.tensors, path)
    // Built on first use: nodes never tokenize, so opening a span must not parse (or reject) it.
    let vocabulary: Vocabulary | undefined
    const loadVocabulary = (): Vocabulary | undefined => {
      if (vocabulary === undefined && header.metadata.has('tokenizer.ggml.tokens'))
        vocabulary = vocabularyFromGguf(header.metadata, config.vocabSize)
      return vocabulary
    }
    const info = (name: TensorName): GgufTensorInfo => {
      const t = header.tensors.get(`${name}.weight`)
      if (!t) throw new InvalidModelError(`${path}: tensor ${name}.weight is missing`)
      const want = expectedShape(name, config)
      const got = [...t.ne].reverse()
      if (want && want.join(',') !== got.join(',')) {
        throw new InvalidModelError(`${path}: tensor ${name}.weight is [${got}] but the config needs [${want}]`)
      }
      return t
    }
    for (let l = 0; l < config.nLayers; l++) info(`blk.${l}.attn_q`)
    const model: ModelFile = {
      format: 'gguf',
      path,
      config,
      get vocabulary() {
        return loadVocabulary()
      },
      metadata: header.metadata,
      weightDType: info('blk.0.attn_q').dtype,
      hasTensor: (name) => header.tensors.has(`${name}.weight`),
      readMatrix(name) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        if (t.ne.length !== 2) throw new InvalidModelError(`${path}: tensor ${name} is not a matrix`)
        return { dtype: t.dtype, rows: t.ne[1], cols: t.ne[0], data: file.read(t.offset, t.sizeBytes, name) }
      },
      matrixInfo(name) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        if (t.ne.length !== 2) throw new InvalidModelError(`${path}: tensor ${name} is not a matrix`)
        return { dtype: t.dtype, rows: t.ne[1], cols: t.ne[0] }
      },
      readMatrixInto(name, into) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        file.read(t.offset, t.sizeBytes, name, into)
      },
      readVector(name) {
        const t = info(name)
        const bytes = file.read(t.offset, t.sizeBytes, name)
        if (t.dtype === 'f32') return new Float32Array(bytes.buffer, 0, t.sizeBytes / 4)
        if (t.dtype === 'f16') {
          const table = f16Table()
          const h = new Uint16Array(bytes.buffer, 0, t.sizeBytes / 2)
          return Float32Array.from(h, (x) => table[x])
        }
        throw new InvalidModelError(`${path}: 1-D tensor ${name} is ${t.dtype}; expected f32 or f16`)
      },
      sampleTensor(name, maxBytes) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        return sampleRange(t.sizeBytes, maxBytes, (at, n) => file.read(t.offset + at, n, name))
      },
      bytesRead: () => file.bytesRead(),
      close: () => file.close()
    }
    return model
  } catch (err) {
    file.close()
    throw err
  }
}
