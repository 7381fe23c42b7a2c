import { readFileSync } from 'node:fs'
import {
  InvalidArgumentError,
  InvalidModelError,
  TokenizerMismatchError,
  TruncatedFileError,
  UnsupportedModelError
} from './errors.js'
import type { GgufValue } from './model-file.js'
import type { Vocabulary } from './types.js'

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

/**
 * The SentencePiece vocabulary of a GGUF file (`tokenizer.ggml.*`, as llama.cpp's
 * llama_vocab::load reads it). Only the 'llama' (SPM) tokenizer model is supported.
 * Missing scores default to 0 and missing special ids to 1/2/0, as in llama.cpp.
 * stopIds is [EOS], the end-of-generation token llama.cpp uses.
 */
export function vocabularyFromGguf(metadata: ReadonlyMap<string, GgufValue>, vocabSize: number): Vocabulary {
  checkVocabSize(vocabSize)
  const model = metadata.get('tokenizer.ggml.model')
  if (model !== 'llama') {
    throw new UnsupportedModelError(
      `GGUF tokenizer.ggml.model is ${model === undefined ? 'missing' : JSON.stringify(model)}; ` +
        `only 'llama' (SentencePiece BPE) is supported`
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
  return {
    pieces: (tokens as string[]).map((t) => t.replace(SPM_SPACE, ' ')),
    scores: scoreList ? Float32Array.from(scoreList) : new Float32Array(n),
    ...(typeList ? { types: Int32Array.from(typeList) } : {}),
    bosId: tokenId(metadata, 'tokenizer.ggml.bos_token_id', LLAMA2C_BOS, n),
    eosId,
    unkId: tokenId(metadata, 'tokenizer.ggml.unknown_token_id', LLAMA2C_UNK, n),
    stopIds: [eosId]
  }
}
