import { readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import {
  InvalidArgumentError,
  InvalidModelError,
  TokenizerMismatchError,
  TruncatedFileError,
  UnsupportedModelError
} from '../../shards/errors.js'
import type { GgufValue } from '../../shards/model/model-file.js'
import { createTokenizer } from '../../shards/tokenizers/tokenizer.js'
import { readLlama2cTokenizer, vocabularyFromGguf } from '../../shards/tokenizers/tokenizer-files.js'
import type { Vocabulary } from '../../shards/types.js'
import { ggufMetadata, parseGguf } from '../helpers/gguf-parse.js'

const MODELS = fileURLToPath(new URL('../../models', import.meta.url))
const TOK512 = join(MODELS, 'tok512.bin')
const GGUF = join(MODELS, 'stories260K.gguf')
const REFERENCE = fileURLToPath(new URL('../vectors', import.meta.url))

interface Reference {
  prompt: string
  prompt_tokens: number[]
  all_tokens: number[]
  text: string
  pieces: string[]
}
const references = ['stories260K_greedy_once_upon_a_time.json', 'stories260K_greedy_bos.json'].map(
  (f): Reference => JSON.parse(readFileSync(join(REFERENCE, f), 'utf8'))
)

/** The metadata through test/helpers/gguf-parse.ts, so this test does not depend on shards/formats/gguf-reader.ts. */
function readGgufMetadata(path: string): Map<string, GgufValue> {
  const file = readFileSync(path)
  const g = parseGguf(file)
  expect([g.magic, g.version]).toEqual(['GGUF', 3])
  return ggufMetadata(file)
}

const binVocab = readLlama2cTokenizer(TOK512, 512)
const ggufMeta = readGgufMetadata(GGUF)
const ggufVocab = vocabularyFromGguf(ggufMeta, 512)
const sources: [string, Vocabulary][] = [
  ['tokenizer.bin', binVocab],
  ['gguf', ggufVocab]
]

const TEXTS = [
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park.',
  'One day, Tim saw a big red ball. "Can I play with it?" he asked his mom. She said, "Yes!"',
  'They were happy.\nThe end.\n\nThen 3 cats and 42 dogs came at 10:30; it was 100% fun!',
  '  leading spaces, trailing spaces  ',
  'Tabs\tand\r\nCRLF, a café, a naïve idea, a jalapeño — and “quotes” ’n’ stuff…',
  'emoji 🙂 and 🎉🎉, Chinese 你好，世界, Greek αβγ, math ∑ x² ≤ 1',
  'a',
  ' ',
  '\n',
  '🙂'
]

/** run.c encode(), transcribed literally (quadratic scan), to check the fast merge against. */
function llama2cEncode(v: Vocabulary, text: string): number[] {
  const ids = new Map<string, number>()
  v.pieces.forEach((p, id) => {
    if (!ids.has(p)) ids.set(p, id)
  })
  const lookup = (s: string): number => ids.get(s) ?? -1
  const byteId = (b: number): number => {
    const id = lookup(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)
    return id === -1 ? v.unkId : id
  }
  const tokens = [v.bosId]
  const push = (s: string): void => {
    const id = lookup(s)
    if (id !== -1) tokens.push(id)
    else for (const b of new TextEncoder().encode(s)) tokens.push(byteId(b))
  }
  if (text !== '') push(' ')
  for (const ch of text) push(ch)
  for (;;) {
    let bestScore = -1e10
    let bestId = -1
    let bestIdx = -1
    for (let i = 0; i < tokens.length - 1; i++) {
      const id = lookup(v.pieces[tokens[i]] + v.pieces[tokens[i + 1]])
      if (id !== -1 && v.scores[id] > bestScore) {
        bestScore = v.scores[id]
        bestId = id
        bestIdx = i
      }
    }
    if (bestIdx === -1) break
    tokens.splice(bestIdx, 2, bestId)
  }
  return tokens
}

describe('tokenizer files', () => {
  it('reads the llama2.c tokenizer.bin and the GGUF vocabulary alike', () => {
    expect(binVocab.pieces).toHaveLength(512)
    expect(binVocab.pieces.slice(0, 4)).toEqual(['<unk>', '\n<s>\n', '\n</s>\n', '<0x00>'])
    expect(binVocab.stopIds).toEqual([1])
    expect(ggufVocab.pieces.slice(0, 3)).toEqual(['<unk>', '<s>', '</s>'])
    expect(ggufVocab.stopIds).toEqual([2])
    expect(ggufVocab.types?.[1]).toBe(3)
    expect(ggufVocab.pieces[259]).toBe(' t') // '▁t' in the file
    expect(ggufVocab.pieces.slice(3)).toEqual(binVocab.pieces.slice(3))
    expect(Array.from(ggufVocab.scores)).toEqual(Array.from(binVocab.scores))
    for (const v of [binVocab, ggufVocab]) expect([v.bosId, v.eosId, v.unkId]).toEqual([1, 2, 0])
  })

  it('rejects truncated files and vocabulary size mismatches', () => {
    const bytes = readFileSync(TOK512)
    const cut = join(tmpdir(), `layerswarm-tok-cut-${process.pid}.bin`)
    writeFileSync(cut, bytes.subarray(0, bytes.length - 2)) // inside the last piece
    expect(() => readLlama2cTokenizer(cut, 512)).toThrow(TruncatedFileError)
    writeFileSync(cut, bytes.subarray(0, bytes.length - 3 - 8 - 2)) // inside a token header
    expect(() => readLlama2cTokenizer(cut, 512)).toThrow(TruncatedFileError)
    writeFileSync(cut, bytes.subarray(0, 2))
    expect(() => readLlama2cTokenizer(cut, 512)).toThrow(TruncatedFileError)
    expect(() => readLlama2cTokenizer(TOK512, 511)).toThrow(TokenizerMismatchError) // bytes left
    expect(() => readLlama2cTokenizer(TOK512, 513)).toThrow(TokenizerMismatchError) // too few
    expect(() => readLlama2cTokenizer(TOK512, 0)).toThrow(InvalidArgumentError)
    expect(() => vocabularyFromGguf(ggufMeta, 32000)).toThrow(TokenizerMismatchError)
    const bert = new Map(ggufMeta).set('tokenizer.ggml.model', 'bert')
    expect(() => vocabularyFromGguf(bert, 512)).toThrow(UnsupportedModelError)
    const gpt2 = new Map(ggufMeta).set('tokenizer.ggml.model', 'gpt2') // byte-level BPE needs merges
    expect(() => vocabularyFromGguf(gpt2, 512)).toThrow(InvalidModelError)
    const badBos = new Map(ggufMeta).set('tokenizer.ggml.bos_token_id', 512)
    expect(() => vocabularyFromGguf(badBos, 512)).toThrow(TokenizerMismatchError)
  })
})

describe.each(sources)('tokenizer (%s)', (_name, vocab) => {
  const tok = createTokenizer(vocab)

  it('encodes the reference prompts exactly as llama2.c', () => {
    for (const ref of references) expect(tok.encode(ref.prompt)).toEqual(ref.prompt_tokens)
    expect(tok.encode('Once upon a time')).toEqual([1, 403, 407, 261, 378])
    expect(tok.encode('')).toEqual([1])
    expect(tok.encode('', { bos: false })).toEqual([])
    expect(tok.encode('Once', { bos: false, eos: true })).toEqual([403, 2])
  })

  it('decodes the reference generations as llama2.c prints them', () => {
    for (const ref of references) {
      expect(tok.decode(ref.all_tokens)).toBe(ref.text)
      // run.c prints decode(prev, next) for every token after BOS, as the stream decoder does.
      const stream = tok.createDecoder()
      let printed = ''
      for (let i = 1; i < ref.all_tokens.length; i++) printed += stream.push(ref.all_tokens[i], ref.all_tokens[i - 1])
      expect(printed + stream.flush()).toBe(ref.text)
      if (vocab === binVocab) expect(ref.all_tokens.map((id) => tok.pieceOf(id))).toEqual(ref.pieces)
    }
  })

  it('matches a literal transcription of run.c encode() and round-trips', () => {
    for (const text of TEXTS) {
      const ids = tok.encode(text)
      expect(ids).toEqual(llama2cEncode(vocab, text))
      expect(ids[0]).toBe(1)
      expect(tok.decode(ids)).toBe(text)
      expect(tok.decode(tok.encode(text, { eos: true }))).toBe(text)
    }
  })

  it('falls back to <0xNN> byte tokens for characters not in the vocabulary', () => {
    // 🙂 is F0 9F 99 82; the dummy-prefix space has nothing to merge with.
    const ids = tok.encode('🙂')
    expect(ids.slice(1).map((id) => tok.pieceOf(id))).toEqual([' ', '<0xF0>', '<0x9F>', '<0x99>', '<0x82>'])
    expect(ids.slice(2)).toEqual([0xf0 + 3, 0x9f + 3, 0x99 + 3, 0x82 + 3]) // run.c's byte+3
    expect(tok.encode('你', { bos: false }).map((id) => tok.pieceOf(id))).toEqual([' ', '<0xE4>', '<0xBD>', '<0xA0>'])
    expect(tok.encode('café', { bos: false }).map((id) => tok.pieceOf(id))).toContain('é') // in the vocab
  })

  it('streams text, holding back multi-byte characters split over byte tokens', () => {
    const ids = tok.encode('Hi 🙂 你好!')
    const stream = tok.createDecoder()
    const parts = ids.map((id, i) => stream.push(id, i > 0 ? ids[i - 1] : -1))
    const at = ids.indexOf(0xf0 + 3)
    expect(parts.slice(at, at + 3)).toEqual(['', '', '']) // F0 9F 99 are incomplete
    expect(parts[at + 3]).toBe('🙂')
    expect(parts.join('') + stream.flush()).toBe(tok.decode(ids))
    for (const text of TEXTS) {
      const all = tok.encode(text)
      const s = tok.createDecoder()
      expect(all.map((id, i) => s.push(id, i > 0 ? all[i - 1] : -1)).join('') + s.flush()).toBe(text)
    }
    // An unfinished sequence comes out as U+FFFD on flush.
    const cut = tok.createDecoder()
    expect(cut.push(0xf0 + 3, -1)).toBe('')
    expect(cut.flush()).toBe('\uFFFD')
  })

  it('strips one leading space after BOS only, and prints no special tokens', () => {
    expect(tok.decode([1, 403])).toBe('Once')
    expect(tok.decode([403, 403])).toBe(' Once Once')
    expect(tok.decode([1, 0x20 + 3, 403])).toBe('  Once') // <0x20> is not a piece starting with ' '
    expect(tok.decode([1, 2, 1])).toBe('')
  })

  it('validates ids', () => {
    expect(() => tok.decode([512])).toThrow(InvalidArgumentError)
    expect(() => tok.decode([-1])).toThrow(InvalidArgumentError)
    expect(() => tok.decode([1.5])).toThrow(InvalidArgumentError)
    expect(() => tok.pieceOf(512)).toThrow(InvalidArgumentError)
    expect(() => tok.createDecoder().push(3, 600)).toThrow(InvalidArgumentError)
    expect([tok.vocabSize, tok.bosId, tok.eosId]).toEqual([512, 1, 2])
  })

  it('encodes long texts fast and still exactly as run.c', () => {
    const story = TEXTS.join(' ').repeat(8) // ~3000 characters
    expect(tok.encode(story)).toEqual(llama2cEncode(vocab, story))
    const long = story.repeat(10)
    const t0 = performance.now()
    const ids = tok.encode(long)
    expect(performance.now() - t0).toBeLessThan(1000)
    expect(tok.decode(ids)).toBe(long)
  })
})

describe('merge order', () => {
  // Equal scores everywhere: run.c's strict `>` scan takes the leftmost pair on ties.
  const pieces = ['<unk>', '<s>', '</s>', ' ', 'a', 'b', 'aa', 'ab', 'ba', 'aaa', ' a', 'bb', 'abb']
  const vocab: Vocabulary = {
    pieces,
    scores: Float32Array.from(pieces, (p) => (p === 'abb' ? -1 : p === 'bb' ? -2 : -5)),
    bosId: 1,
    eosId: 2,
    unkId: 0,
    stopIds: [2]
  }
  const tok = createTokenizer(vocab)

  it('breaks ties leftmost, prefers higher scores, and falls back to UNK without byte pieces', () => {
    const show = (t: string): string[] => tok.encode(t, { bos: false }).map((id) => tok.pieceOf(id))
    expect(show('aaa')).toEqual([' a', 'aa'])
    expect(show('abba')).toEqual([' ', 'abb', 'a']) // bb first, then abb
    expect(show('xa')).toEqual([' ', '<unk>', 'a'])
    let seed = 7
    const random = (): number => {
      seed = (seed * 48271) % 2147483647 // MINSTD, exact in doubles
      return seed
    }
    for (let n = 0; n < 300; n++) {
      let text = ''
      for (let i = 0; i < n % 40; i++) text += 'ab a'[random() % 4]
      expect(tok.encode(text)).toEqual(llama2cEncode(vocab, text))
    }
  })

  it('rejects inconsistent vocabularies', () => {
    expect(() => createTokenizer({ ...vocab, scores: new Float32Array(3) })).toThrow(InvalidArgumentError)
    expect(() => createTokenizer({ ...vocab, bosId: 99 })).toThrow(InvalidArgumentError)
    expect(() => createTokenizer({ ...vocab, pieces: [] })).toThrow(InvalidArgumentError)
  })
})
