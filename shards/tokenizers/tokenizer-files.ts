import { readFileSync } from 'node:fs'
import {
  InvalidArgumentError,
  InvalidModelError,
  TokenizerMismatchError,
  TruncatedFileError,
  UnsupportedModelError
} from '../errors.js'
import type { GgufValue } from '../model/model-file.js'
import type { Vocabulary } from '../types.js'

/** Special ids of llama2.c's tokenizer.bin; run.c hard-codes them (BOS 1, EOS 2, UNK 0). */
const LLAMA2C_UNK = 0
const LLAMA2C_BOS = 1
const LLAMA2C_EOS = 2

/** SentencePiece writes spaces as U+2581 LOWER ONE EIGHTH BLOCK; Vocabulary holds real spaces. */
const SPM_SPACE = /\u2581/g

function checkVocabSize(vocabSize: number): void {
  if (!Number.isSafeInteger(vocabSize) || vocabSize <= 0) {
    throw new InvalidArgumentError(`vocabSize must be a positive integer, got ${vocabSize}`)
  }
}

/**
 * Read a llama2.c `tokenizer.bin` (as written by llama2.c tokenizer.py and read by run.c
 * build_tokenizer): int32 max_token_length, then per token float32 score, int32 byte length
 * and that many UTF-8 bytes, all little-endian. The file does not store its token count, so
 * it must hold exactly `vocabSize` tokens (the model's), with no bytes left over.
 *
 * stopIds is [BOS]: run.c ends generation when it samples BOS (1), which delimits
 * TinyStories training sequences; it never stops on EOS.
 */
export function readLlama2cTokenizer(path: string, vocabSize: number): Vocabulary {
  checkVocabSize(vocabSize)
  const bytes = readFileSync(path)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const utf8 = new TextDecoder('utf-8', { fatal: true })
  if (bytes.length < 4) {
    throw new TruncatedFileError(`${path}: ${bytes.length} bytes, too short for max_token_length`)
  }
  const pieces: string[] = []
  const scores = new Float32Array(vocabSize)
  let offset = 4
  for (let i = 0; i < vocabSize; i++) {
    if (offset === bytes.length) {
      throw new TokenizerMismatchError(`${path} holds ${i} tokens but the model has ${vocabSize}`)
    }
    if (offset + 8 > bytes.length) {
      throw new TruncatedFileError(`${path}: file ends inside the header of token ${i}`)
    }
    scores[i] = view.getFloat32(offset, true)
    const len = view.getInt32(offset + 4, true)
    offset += 8
    if (len < 0) throw new InvalidModelError(`${path}: token ${i} has negative length ${len}`)
    if (offset + len > bytes.length) {
      throw new TruncatedFileError(`${path}: token ${i} needs ${len} bytes, file has ${bytes.length - offset}`)
    }
    try {
      pieces.push(utf8.decode(bytes.subarray(offset, offset + len)))
    } catch (cause) {
      throw new InvalidModelError(`${path}: token ${i} is not valid UTF-8`, { cause })
    }
    offset += len
  }
  if (offset !== bytes.length) {
    throw new TokenizerMismatchError(
      `${path} has ${bytes.length - offset} bytes after token ${vocabSize - 1}: ` +
        `it holds more tokens than the model's ${vocabSize}`
    )
  }
  return {
    pieces,
    scores,
    bosId: LLAMA2C_BOS,
    eosId: LLAMA2C_EOS,
    unkId: LLAMA2C_UNK,
    stopIds: [LLAMA2C_BOS]
  }
}

function numberArray(value: GgufValue | undefined, key: string): number[] | undefined {
  if (value === undefined) return undefined
  if (!Array.isArray(value)) throw new InvalidModelError(`GGUF ${key} is not an array`)
  return value.map((v, i) => {
    if (typeof v === 'number') return v
    if (typeof v === 'bigint') return Number(v)
    throw new InvalidModelError(`GGUF ${key}[${i}] is not a number`)
  })
}

function tokenId(metadata: ReadonlyMap<string, GgufValue>, key: string, fallback: number, n: number): number {
  const raw = metadata.get(key)
  if (raw === undefined) return fallback
  const id = typeof raw === 'bigint' ? Number(raw) : raw
  if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= n) {
    throw new TokenizerMismatchError(`GGUF ${key} = ${String(raw)} is not a token id below ${n}`)
  }
  return id
}

/** Texts llama.cpp also treats as end of generation (llama_vocab::load, special_eog_ids). */
const EOG_TEXTS = new Set([
  '<|eot_id|>',
  '<|eom_id|>',
  '<|im_end|>',
  '<|end|>',
  '<end_of_turn>',
  '<|endoftext|>',
  '<|end_of_text|>',
  '<EOT>',
  '<|return|>',
  '<|call|>'
])
/** GGUF token type CONTROL: only control tokens are taken as ends of generation by their text. */
const TYPE_CONTROL = 3

function flag(metadata: ReadonlyMap<string, GgufValue>, key: string): boolean | undefined {
  const v = metadata.get(key)
  if (v === undefined) return undefined
  if (typeof v !== 'boolean') throw new InvalidModelError(`GGUF ${key} is not a boolean`)
  return v
}

/**
 * The vocabulary of a GGUF file (`tokenizer.ggml.*`, as llama.cpp's llama_vocab::load reads
 * it): 'llama' (SentencePiece) or 'gpt2' (byte-level BPE with merges and the pre-tokenizer
 * `tokenizer.ggml.pre` names). Missing scores default to 0 and missing special ids to 1/2/0,
 * as in llama.cpp. stopIds are every end-of-generation token: eos, eot, eom, and control tokens
 * whose text llama.cpp recognises (`<|eot_id|>`, `<|im_end|>`, ...).
 */
export function vocabularyFromGguf(metadata: ReadonlyMap<string, GgufValue>, vocabSize: number): Vocabulary {
  checkVocabSize(vocabSize)
  const model = metadata.get('tokenizer.ggml.model')
  if (model !== 'llama' && model !== 'gpt2') {
    throw new UnsupportedModelError(
      `GGUF tokenizer.ggml.model is ${model === undefined ? 'missing' : JSON.stringify(model)}; ` +
        `supported: 'llama' (SentencePiece BPE), 'gpt2' (byte-level BPE)`
    )
  }
  const tokens = metadata.get('tokenizer.ggml.tokens')
  if (!Array.isArray(tokens) || tokens.some((t) => typeof t !== 'string')) {
    throw new InvalidModelError('GGUF tokenizer.ggml.tokens is missing or not a string array')
  }
  const n = tokens.length
  if (n !== vocabSize) {
    throw new TokenizerMismatchError(`GGUF tokenizer has ${n} tokens but the model has ${vocabSize}`)
  }
  const scoreList = numberArray(metadata.get('tokenizer.ggml.scores'), 'tokenizer.ggml.scores')
  const typeList = numberArray(metadata.get('tokenizer.ggml.token_type'), 'tokenizer.ggml.token_type')
  if (scoreList && scoreList.length !== n) {
    throw new InvalidModelError(`GGUF tokenizer.ggml.scores has ${scoreList.length} entries, tokens ${n}`)
  }
  if (typeList && typeList.length !== n) {
    throw new InvalidModelError(`GGUF tokenizer.ggml.token_type has ${typeList.length} entries, tokens ${n}`)
  }
  const eosId = tokenId(metadata, 'tokenizer.ggml.eos_token_id', LLAMA2C_EOS, n)
  const stops = new Set([eosId])
  for (const key of ['tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id']) {
    if (metadata.has(key)) stops.add(tokenId(metadata, key, eosId, n))
  }
  const pieces = model === 'llama' ? (tokens as string[]).map((t) => t.replace(SPM_SPACE, ' ')) : (tokens as string[])
  if (typeList) {
    for (let id = 0; id < n; id++) if (typeList[id] === TYPE_CONTROL && EOG_TEXTS.has(pieces[id])) stops.add(id)
  }
  const addBos = flag(metadata, 'tokenizer.ggml.add_bos_token')
  const addEos = flag(metadata, 'tokenizer.ggml.add_eos_token')
  const common = {
    pieces,
    scores: scoreList ? Float32Array.from(scoreList) : new Float32Array(n),
    ...(typeList ? { types: Int32Array.from(typeList) } : {}),
    bosId: tokenId(metadata, 'tokenizer.ggml.bos_token_id', LLAMA2C_BOS, n),
    eosId,
    unkId: tokenId(metadata, 'tokenizer.ggml.unknown_token_id', LLAMA2C_UNK, n),
    stopIds: [...stops],
    ...(addBos !== undefined ? { addBos } : {}),
    ...(addEos !== undefined ? { addEos } : {})
  }
  if (model === 'llama') return { ...common, model }
  const merges = metadata.get('tokenizer.ggml.merges')
  if (!Array.isArray(merges) || merges.some((m) => typeof m !== 'string')) {
    throw new InvalidModelError('GGUF gpt2 tokenizer: tokenizer.ggml.merges is missing or not a string array')
  }
  const pre = metadata.get('tokenizer.ggml.pre')
  if (pre !== undefined && typeof pre !== 'string') throw new InvalidModelError('GGUF tokenizer.ggml.pre is not a string')
  return { ...common, model, merges: merges as string[], ...(pre !== undefined ? { pre } : {}) }
}
