import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { BadMagicError, InvalidModelError, TokenizerMismatchError, TruncatedFileError, UnsupportedModelError } from '../errors.js'
import { llamaDefaults } from '../model/architectures.js'
import { type ModelFile, sampleRange } from '../model/model-file.js'
import { readLlama2cTokenizer } from '../tokenizers/tokenizer-files.js'
import type { ModelConfig, TensorName, Vocabulary } from '../types.js'
import { RangedFile } from './file-reader.js'

/**
 * llama2.c "legacy" v0 checkpoints (export.py legacy_export / run.c): 7 int32 header fields
 * (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len), then f32 weights in
 * this order, all layers of one kind together: token_embedding [vocab, dim], rms_att [L, dim],
 * wq [L, dim, dim], wk [L, kvDim, dim], wv [L, kvDim, dim], wo [L, dim, dim], rms_ffn [L, dim],
 * w1 [L, hidden, dim], w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim],
 * freq_cis_real and freq_cis_imag [seq_len, head_size/2] (unused: RoPE is recomputed), and
 * wcls [vocab, dim] only when vocab_size is negative (an untied classifier).
 */
const HEADER_BYTES = 28
const V1_MAGIC = 0x616b3432 // "ak42": export.py version 1+ files, which this reader does not take

interface Region {
  readonly offset: number
  readonly rows: number
  readonly cols: number
}

export function readLlama2cConfig(file: RangedFile): { config: ModelConfig; regions: Map<string, Region> } {
  const path = file.path
  if (file.sizeBytes < HEADER_BYTES)
    throw new TruncatedFileError(`${path}: ${file.sizeBytes} bytes is too short for a llama2.c checkpoint`)
  const h = new Int32Array(file.read(0, HEADER_BYTES, 'llama2.c header').buffer)
  if (h[0] === V1_MAGIC)
    throw new UnsupportedModelError(`${path}: llama2.c version ${h[1]} export; only the legacy v0 format is supported`)
  const [dim, hiddenDim, nLayers, nHeads, nKvHeads, rawVocab, seqLen] = h
  const vocabSize = Math.abs(rawVocab)
  const plausible =
    dim > 0 &&
    hiddenDim > 0 &&
    nLayers > 0 &&
    nHeads > 0 &&
    nKvHeads > 0 &&
    vocabSize > 0 &&
    seqLen > 0 &&
    dim < 1 << 16 &&
    hiddenDim < 1 << 18 &&
    nLayers < 1024 &&
    vocabSize < 1 << 22 &&
    seqLen < 1 << 22 &&
    dim % nHeads === 0 &&
    nHeads % nKvHeads === 0
  if (!plausible) {
    throw new BadMagicError(`${path}: not a llama2.c checkpoint (header ${Array.from(h).join(', ')} is not a valid config)`)
  }
  const headDim = dim / nHeads
  if (headDim % 2 !== 0) throw new UnsupportedModelError(`${path}: head size ${headDim} is odd`)
  const kvDim = nKvHeads * headDim
  const config: ModelConfig = {
    architecture: 'llama',
    dim,
    hiddenDim,
    nLayers,
    nHeads,
    nKvHeads,
    headDim,
    kvDim,
    vocabSize,
    seqLen,
    ropeTheta: 10000,
    rmsEps: 1e-5,
    tiedEmbeddings: rawVocab > 0,
    ...llamaDefaults(headDim, nHeads)
  }
  const regions = new Map<string, Region>()
  let offset = HEADER_BYTES
  const add = (name: string, rows: number, cols: number): void => {
    regions.set(name, { offset, rows, cols })
    offset += rows * cols * 4
  }
  const perLayer = (kind: string, rows: number, cols: number): void => {
    for (let l = 0; l < nLayers; l++) add(`blk.${l}.${kind}`, rows, cols)
  }
  add('token_embd', vocabSize, dim)
  perLayer('attn_norm', 1, dim)
  perLayer('attn_q', dim, dim)
  perLayer('attn_k', kvDim, dim)
  perLayer('attn_v', kvDim, dim)
  perLayer('attn_output', dim, dim)
  perLayer('ffn_norm', 1, dim)
  perLayer('ffn_gate', hiddenDim, dim)
  perLayer('ffn_down', dim, hiddenDim)
  perLayer('ffn_up', hiddenDim, dim)
  add('output_norm', 1, dim)
  offset += seqLen * headDim * 4 // freq_cis_real + freq_cis_imag, [seq_len, head_size/2] each
  if (!config.tiedEmbeddings) add('output', vocabSize, dim)
  if (offset > file.sizeBytes) {
    throw new TruncatedFileError(`${path}: the header describes ${offset} bytes of weights but the file has ${file.sizeBytes}`)
  }
  if (offset < file.sizeBytes) {
    throw new InvalidModelError(`${path}: ${file.sizeBytes - offset} bytes follow the weights the header describes`)
  }
  return { config, regions }
}

/** Find the tokenizer llama2.c would use: an explicit path, else tok<vocab>.bin or tokenizer.bin beside the model. */
function findTokenizer(modelPath: string, vocabSize: number, explicit?: string): string | undefined {
  if (explicit !== undefined) return explicit
  for (const name of [`tok${vocabSize}.bin`, 'tokenizer.bin']) {
    const p = join(dirname(modelPath), name)
    if (existsSync(p)) return p
  }
  return undefined
}

export function openLlama2cModel(path: string, options: { tokenizerPath?: string } = {}): ModelFile {
  const file = new RangedFile(path)
  try {
    const { config, regions } = readLlama2cConfig(file)
    const tokenizerPath = findTokenizer(path, config.vocabSize, options.tokenizerPath)
    let vocabulary: Vocabulary | undefined
    if (tokenizerPath !== undefined) {
      vocabulary = readLlama2cTokenizer(tokenizerPath, config.vocabSize)
      if (vocabulary.pieces.length !== config.vocabSize) {
        throw new TokenizerMismatchError(
          `${tokenizerPath}: ${vocabulary.pieces.length} tokens, the model has ${config.vocabSize}`
        )
      }
    }
    const region = (name: TensorName): Region => {
      const r = regions.get(name === 'output' && config.tiedEmbeddings ? 'token_embd' : name)
      if (!r) throw new InvalidModelError(`${path}: no tensor ${name}`)
      return r
    }
    return {
      format: 'llama2c',
      path,
      config,
      vocabulary,
      metadata: new Map(),
      weightDType: 'f32',
      hasTensor: (name) => regions.has(name),
      readMatrix(name) {
        const r = region(name)
        return { dtype: 'f32', rows: r.rows, cols: r.cols, data: file.read(r.offset, r.rows * r.cols * 4, name) }
      },
      readVector(name) {
        const r = region(name)
        return new Float32Array(file.read(r.offset, r.rows * r.cols * 4, name).buffer)
      },
      sampleTensor(name, maxBytes) {
        const r = region(name)
        return sampleRange(r.rows * r.cols * 4, maxBytes, (at, n) => file.read(r.offset + at, n, name))
      },
      bytesRead: () => file.bytesRead(),
      close: () => file.close()
    }
  } catch (err) {
    file.close()
    throw err
  }
}
