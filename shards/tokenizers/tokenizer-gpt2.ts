import { InvalidArgumentError } from '../errors.js'
import type { Vocabulary } from '../types.js'
import { createBpeEncoder } from './tokenizer-bpe.js'
import { idChecker, streamDecoder } from './tokenizer-stream.js'
import type { EncodeOptions, StreamDecoder, Tokenizer } from './tokenizer-types.js'

/** Byte-level BPE (GGUF gpt2): tokenizer-bpe.ts does the work; BOS/EOS as the file says. */
export function createGpt2Tokenizer(vocab: Vocabulary): Tokenizer {
  const { pieces, bosId, eosId } = vocab
  const encoder = createBpeEncoder(vocab)
  const checkId = idChecker(pieces.length)
  const text = new TextDecoder('utf-8')
  const createDecoder = (): StreamDecoder => streamDecoder(encoder.tokenBytes, checkId)
  return {
    kind: 'gpt2',
    vocabSize: pieces.length,
    bosId,
    eosId,
    stopIds: vocab.stopIds,
    encode(input: string, options: EncodeOptions = {}): number[] {
      if (typeof input !== 'string') throw new InvalidArgumentError('encode() needs a string')
      const ids = encoder.encodeText(input, options.special ?? false)
      if (options.bos ?? vocab.addBos ?? true) ids.unshift(bosId)
      if (options.eos ?? vocab.addEos ?? false) ids.push(eosId)
      return ids
    },
    decode(ids: readonly number[]): string {
      const stream = createDecoder()
      let out = ''
      for (const id of ids) out += stream.push(id, -1)
      return out + stream.flush()
    },
    createDecoder,
    pieceOf(id: number): string {
      checkId(id, 'token')
      const bytes = encoder.tokenBytes[id]
      return bytes.length === 0 ? pieces[id] : text.decode(bytes)
    },
    tokenBytes(id: number): Uint8Array {
      checkId(id, 'token')
      return encoder.tokenBytes[id]
    }
  }
}
