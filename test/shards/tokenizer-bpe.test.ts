import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { runInspect } from '../../node/cli/commands/inspect.js'
import { UnsupportedModelError } from '../../shards/errors.js'
import { type GgufTypedValue, ggufPlainValue } from '../../shards/formats/gguf-values.js'
import { parseShape, writeRandomModel } from '../../shards/formats/random-model.js'
import type { GgufValue } from '../../shards/model/model-file.js'
import { openModelFile } from '../../shards/model/open-model.js'
import { createShard } from '../../shards/shard.js'
import { preTokenize, preTokenizerFor } from '../../shards/tokenizers/bpe-pretokenize.js'
import { createTokenizer } from '../../shards/tokenizers/tokenizer.js'
import { BYTE_TO_CHAR } from '../../shards/tokenizers/tokenizer-bpe.js'
import { vocabularyFromGguf } from '../../shards/tokenizers/tokenizer-files.js'
import { loadPackageVocabulary } from '../../shards/tokenizers/vocab-packages.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-bpe-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function metadataOf(name: 'llama3' | 'qwen'): Map<string, GgufValue> {
  const v = loadPackageVocabulary(name)
  return new Map<string, GgufValue>(v.metadata.map(([k, val]) => [k, ggufPlainValue(val)]))
}

describe('pre-tokenizers named by tokenizer.ggml.pre (llama.cpp llm_tokenizer_bpe)', () => {
  const text = "Hello world's 1234"
  it.each([
    ['gpt-2', ['Hello', ' world', "'s", ' 1234']],
    ['smollm', ['Hello', ' world', "'s", ' ', '1', '2', '3', '4']],
    ['default', ['Hello', ' world', "'", 's', ' ', '123', '4']],
    ['llama-bpe', ['Hello', ' world', "'s", ' ', '123', '4']],
    ['qwen2', ['Hello', ' world', "'s", ' ', '1', '2', '3', '4']]
  ])('%s', (pre, words) => {
    expect(preTokenize(preTokenizerFor(pre), text)).toEqual(words)
  })

  it('gaps between matches are words too (gpt-2 has no catch-all \\s+)', () => {
    expect(preTokenize(preTokenizerFor('gpt-2'), 'a\tb')).toEqual(['a', '\t', 'b'])
  })

  it('an unknown name is UNSUPPORTED_MODEL naming the supported ones', () => {
    expect(() => preTokenizerFor('tekken')).toThrow(UnsupportedModelError)
    expect(() => preTokenizerFor('tekken')).toThrow(/llama-bpe.*qwen2.*smollm/)
  })
})

describe('GGUF gpt2 vocabulary (Llama 3 as make-model writes it)', () => {
  const meta = metadataOf('llama3')
  const vocab = vocabularyFromGguf(meta, 128256)
  const tok = createTokenizer(vocab)

  it('adds BOS as the file says, and stops at eos, eot and <|eot_id|>', () => {
    expect(tok.kind).toBe('gpt2')
    expect(tok.encode('Hi')[0]).toBe(128000)
    expect(tok.encode('Hi', { bos: false })[0]).not.toBe(128000)
    expect([...tok.stopIds].sort()).toEqual([128001, 128009])
  })

  it('control tokens are tokens only with special; as text they are pieces of text', () => {
    expect(tok.encode('<|eot_id|>', { bos: false, special: true })).toEqual([128009])
    const asText = tok.encode('<|eot_id|>', { bos: false })
    expect(asText.length).toBeGreaterThan(1)
    expect(tok.decode(asText)).toBe('<|eot_id|>')
    // Control tokens print nothing when decoded (as llama.cpp without --special).
    expect(tok.decode([128009])).toBe('')
    expect(tok.pieceOf(128009)).toBe('<|eot_id|>')
  })

  it('streams UTF-8 split across byte tokens: nothing until the character is whole', () => {
    const bytes = [...new TextEncoder().encode('😀é')]
    const ids = bytes.map((b) => vocab.pieces.indexOf(BYTE_TO_CHAR[b]))
    expect(ids.every((id) => id >= 0)).toBe(true)
    const stream = tok.createDecoder()
    const out = ids.map((id, i) => stream.push(id, i > 0 ? ids[i - 1] : -1))
    expect(out).toEqual(['', '', '', '😀', '', 'é'])
    expect(stream.flush()).toBe('')
  })

  it('an unknown pre fails when the tokenizer is built, not when the file is read', () => {
    const m = new Map(meta).set('tokenizer.ggml.pre', 'no-such-pre')
    expect(() => createTokenizer(vocabularyFromGguf(m, 128256))).toThrow(UnsupportedModelError)
  })
})

describe('Qwen vocabulary', () => {
  const tok = createTokenizer(vocabularyFromGguf(metadataOf('qwen'), 151936))
  it('no BOS (add_bos_token false), <|im_end|> and <|endoftext|> stop, no NFC (as llama.cpp)', () => {
    expect(tok.encode('Hi')).toEqual(tok.encode('Hi', { bos: false }))
    expect(tok.stopIds).toContain(151645)
    expect(tok.stopIds).toContain(151643)
    expect(tok.encode('cafe\u0301')).not.toEqual(tok.encode('café'))
  })
})

describe('nodes never build the tokenizer', () => {
  it('a GGUF whose tokenizer this engine cannot read still opens and serves a span', () => {
    const path = join(dir, 'odd-tokenizer.gguf')
    const tokenizerMetadata: Array<[string, GgufTypedValue]> = [
      ['tokenizer.ggml.model', { type: 'string', value: 'no-such-tokenizer' }],
      ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: Array.from({ length: 300 }, (_, i) => `t${i}`) }]
    ]
    writeRandomModel(path, parseShape('tiny'), { dtype: 'f32', seed: 3, tokenizerMetadata })
    const model = openModelFile(path)
    try {
      const shard = createShard({ model, start: 0, end: 2 })
      expect(shard).toBeDefined()
      expect(() => model.vocabulary).toThrow(UnsupportedModelError)
    } finally {
      model.close()
    }
    // inspect still describes it, saying why the tokenizer cannot be built.
    const info = runInspect({ model: path, kvDType: 'f32' })
    expect(info.tokenizer).toMatchObject({ kind: 'no-such-tokenizer', error: expect.stringMatching(/UNSUPPORTED_MODEL/) })
  })
})

describe('SentencePiece with special tokens', () => {
  it('control tokens written as text are tokens with special; each text run gets the dummy prefix (llama.cpp)', () => {
    const m = openModelFile(fileURLToPath(new URL('../../models/stories260K.gguf', import.meta.url)))
    const tok = createTokenizer(m.vocabulary!)
    m.close()
    expect(tok.encode('Hi</s>there', { special: true })).toEqual([
      ...tok.encode('Hi'),
      tok.eosId,
      ...tok.encode('there', { bos: false })
    ])
    expect(tok.encode('Hi</s>there')).not.toContain(tok.eosId)
  })
})
