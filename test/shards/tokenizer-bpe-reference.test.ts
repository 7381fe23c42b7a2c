import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers'
import { describe, expect, it } from 'vitest'
import { tokenizerStrings } from '../../bench/crosscheck/tokenizer-strings.js'
import { ggufPlainValue } from '../../shards/formats/gguf-values.js'
import type { GgufValue } from '../../shards/model/model-file.js'
import { createTokenizer, type Tokenizer } from '../../shards/tokenizers/tokenizer.js'
import { vocabularyFromGguf } from '../../shards/tokenizers/tokenizer-files.js'
import { loadPackageVocabulary, VOCAB_PACKAGES, type VocabPackageName } from '../../shards/tokenizers/vocab-packages.js'

// Issue 15 reference check: our byte-level BPE, reading the vocabulary from the GGUF metadata
// make-model writes (llama.cpp's converter layout), tokenizes exactly as Hugging Face's
// tokenizer does over the same tokenizer.json, on 2,000 seeded strings per vocabulary.

const STRINGS = 2000
const require = createRequire(import.meta.url)

function hfTokenizer(name: VocabPackageName, keepSpecial: boolean): HfTokenizer {
  const pkg = VOCAB_PACKAGES[name].pkg
  const json = JSON.parse(readFileSync(require.resolve(`${pkg}/models/tokenizer.json`), 'utf8'))
  const config = JSON.parse(readFileSync(require.resolve(`${pkg}/models/tokenizer_config.json`), 'utf8'))
  if (!keepSpecial) {
    // Hugging Face always matches its added tokens; without the special ones (control tokens in
    // the GGUF) it tokenizes their text as text, which is what parse_special = false means.
    json.added_tokens = json.added_tokens.filter((t: { special: boolean; content: string }) => !t.special)
  }
  // llama.cpp normalises no text, and its tokens are the reference (issue 31): Qwen's NFC
  // normalizer goes, so decomposed accents in the strings are compared as given.
  json.normalizer = null
  return new HfTokenizer(json, config)
}

function ours(name: VocabPackageName): Tokenizer {
  const v = loadPackageVocabulary(name)
  const metadata = new Map<string, GgufValue>(v.metadata.map(([k, val]) => [k, ggufPlainValue(val)]))
  return createTokenizer(vocabularyFromGguf(metadata, v.tokens.length))
}

describe.each(['llama3', 'qwen'] as const)('byte-level BPE %s equals Hugging Face tokenizers', (name) => {
  const tokenizer = ours(name)
  const strings = tokenizerStrings(STRINGS, name === 'llama3' ? 3 : 7)

  it(`${STRINGS} strings, special tokens parsed`, () => {
    const hf = hfTokenizer(name, true)
    const bad: string[] = []
    for (const s of strings) {
      const want = hf.encode(s, { add_special_tokens: false }).ids
      const got = tokenizer.encode(s, { bos: false, special: true })
      if (JSON.stringify(got) !== JSON.stringify(want)) bad.push(JSON.stringify(s))
    }
    expect(bad.slice(0, 10)).toEqual([])
  })

  it(`${STRINGS} strings, special tokens as text`, () => {
    const hf = hfTokenizer(name, false)
    const bad: string[] = []
    for (const s of strings) {
      const want = hf.encode(s, { add_special_tokens: false }).ids
      const got = tokenizer.encode(s, { bos: false })
      if (JSON.stringify(got) !== JSON.stringify(want)) bad.push(JSON.stringify(s))
    }
    expect(bad.slice(0, 10)).toEqual([])
  })

  it('decodes back to the text (streaming, one token at a time)', () => {
    for (const s of strings.slice(0, 300)) {
      const ids = tokenizer.encode(s, { bos: false })
      const stream = tokenizer.createDecoder()
      let text = ''
      ids.forEach((id, i) => {
        text += stream.push(id, i > 0 ? ids[i - 1] : -1)
      })
      text += stream.flush()
      expect(text).toBe(new TextDecoder().decode(new TextEncoder().encode(s)))
    }
  })
})
