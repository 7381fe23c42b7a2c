import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers'
import { describe, expect, it } from 'vitest'
import { ggufPlainValue } from '../../shards/formats/gguf-values.js'
import type { GgufValue } from '../../shards/model/model-file.js'
import { openModelFile } from '../../shards/model/open-model.js'
import { createTokenizer } from '../../shards/tokenizers/tokenizer.js'
import { vocabularyFromGguf } from '../../shards/tokenizers/tokenizer-files.js'
import { TOKEN_TYPE } from '../../shards/tokenizers/tokenizer-special.js'
import { loadPackageVocabulary, VOCAB_PACKAGES, type VocabPackageName } from '../../shards/tokenizers/vocab-packages.js'
import type { Vocabulary } from '../../shards/types.js'

// Issue 31 item 6: tokenizer edge cases, llama.cpp (src/llama-vocab.cpp) as the oracle.
// - llama.cpp normalises no text for BPE (llm_tokenizer_bpe_session runs unicode_regex_split
//   on the bytes as given) nor for SPM (llm_tokenizer_spm_session only escapes spaces). Hugging
//   Face's Qwen tokenizer.json has an NFC normalizer; its model without that normalizer is what
//   llama.cpp runs, so it is the oracle here for text that is not in NFC form.
// - tokenizer_st_partition: tokens typed CONTROL (or UNKNOWN) are cut out of the text when
//   parse_special is on; USER_DEFINED ones always, whatever their spelling.

const require = createRequire(import.meta.url)

/** Not NFC: decomposed accents, Hangul jamo, a compatibility form NFC keeps, and mixed text. */
const NOT_NFC = [
  'cafe\u0301',
  'e\u0301te\u0301 a\u0300 Pe\u0301kin',
  'Ame\u0301lie\u0301 said: "re\u0301sume\u0301"',
  '\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af',
  'n\u0303o\u0308 A\u030a',
  'o\u0308\u0304 and \u212b (angstrom sign)',
  'Zoe\u0308 1234 \u0915\u094d\u0937'
]

function hfTokenizer(name: VocabPackageName, opts: { normalizer: boolean; extra?: [number, string, boolean][] }): HfTokenizer {
  const pkg = VOCAB_PACKAGES[name].pkg
  const json = JSON.parse(readFileSync(require.resolve(`${pkg}/models/tokenizer.json`), 'utf8'))
  const config = JSON.parse(readFileSync(require.resolve(`${pkg}/models/tokenizer_config.json`), 'utf8'))
  if (!opts.normalizer) json.normalizer = null
  for (const [id, content, special] of opts.extra ?? []) {
    json.added_tokens.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special })
  }
  return new HfTokenizer(json, config)
}

function packageVocabulary(name: VocabPackageName): Vocabulary {
  const v = loadPackageVocabulary(name)
  const metadata = new Map<string, GgufValue>(v.metadata.map(([k, val]) => [k, ggufPlainValue(val)]))
  return vocabularyFromGguf(metadata, v.tokens.length)
}

/** `vocab` with some pieces replaced by added tokens of the given GGUF types. */
function withAdded(vocab: Vocabulary, added: readonly [number, string, number][]): Vocabulary {
  const pieces = [...vocab.pieces]
  const types = Int32Array.from(vocab.types ?? new Int32Array(pieces.length).fill(TOKEN_TYPE.normal))
  for (const [id, text, type] of added) {
    pieces[id] = text
    types[id] = type
  }
  return { ...vocab, pieces, types }
}

describe('text not in NFC form is tokenized as given (llama.cpp normalises nothing)', () => {
  it.each(['qwen', 'llama3'] as const)('%s: equals Hugging Face without a normalizer', (name) => {
    const ours = createTokenizer(packageVocabulary(name))
    const hf = hfTokenizer(name, { normalizer: false })
    for (const s of NOT_NFC) {
      expect(s.normalize('NFC') === s && !s.includes('\u212b')).toBe(false)
      expect({ s, ids: ours.encode(s, { bos: false }) }).toEqual({ s, ids: hf.encode(s, { add_special_tokens: false }).ids })
      expect({ s, ids: ours.encode(s, { bos: false, special: true }) }).toEqual({
        s,
        ids: hf.encode(s, { add_special_tokens: false }).ids
      })
    }
  })

  it.each(['qwen', 'llama3'] as const)('%s: the decomposed text decodes back unchanged', (name) => {
    const ours = createTokenizer(packageVocabulary(name))
    for (const s of NOT_NFC) expect(ours.decode(ours.encode(s, { bos: false }))).toBe(s)
  })

  it('qwen: NFC and NFD forms of one word are different tokens (no normalisation)', () => {
    const ours = createTokenizer(packageVocabulary('qwen'))
    expect(ours.encode('cafe\u0301', { bos: false })).not.toEqual(ours.encode('caf\u00e9', { bos: false }))
  })

  it('SPM (stories260K, llama.cpp llm_tokenizer_spm): decomposed text stays decomposed', () => {
    const tok = createTokenizer(openModelFile('models/stories260K.gguf').vocabulary as Vocabulary)
    for (const s of NOT_NFC) expect(tok.decode(tok.encode(s, { bos: false }))).toBe(` ${s}`) // the dummy-prefix space, kept without BOS
    expect(tok.encode('cafe\u0301', { bos: false })).not.toEqual(tok.encode('caf\u00e9', { bos: false }))
  })
})

// Spellings of several families' chat tokens, put into vocabularies that never had them.
const FAMILY_SPELLINGS: readonly [string, number][] = [
  ['<start_of_turn>', TOKEN_TYPE.control], // Gemma
  ['<end_of_turn>', TOKEN_TYPE.control],
  ['[INST]', TOKEN_TYPE.control], // Mistral
  ['[/INST]', TOKEN_TYPE.control],
  ['<|eot_id|>', TOKEN_TYPE.control], // Llama 3
  ['<|user_tok|>', TOKEN_TYPE.userDefined],
  ['<extra_id_7>', TOKEN_TYPE.userDefined]
]
const CHAT = '<start_of_turn>user\nHi [INST] there [/INST]<|user_tok|> ok<end_of_turn>\n<|eot_id|><extra_id_7>x'

describe('control and user-defined tokens of any spelling (llama.cpp tokenizer_st_partition)', () => {
  it('gpt2 vocabulary (Qwen ids past its tokenizer): as Hugging Face with them as added tokens', () => {
    const base = packageVocabulary('qwen')
    const firstFree = 151669 // Qwen 3's [PAD] ids: unused by its tokenizer
    const added = FAMILY_SPELLINGS.map(([text, type], i): [number, string, number] => [firstFree + i, text, type])
    const ours = createTokenizer(withAdded(base, added))
    const extra = added.map(([id, text, type]): [number, string, boolean] => [id, text, type === TOKEN_TYPE.control])
    const hfAll = hfTokenizer('qwen', { normalizer: false, extra })
    const hfUserOnly = hfTokenizer('qwen', { normalizer: false, extra: extra.filter(([, , special]) => !special) })
    hfUserOnly.encode('') // added tokens compiled
    const special = ours.encode(CHAT, { bos: false, special: true })
    expect(special).toEqual(hfAll.encode(CHAT, { add_special_tokens: false }).ids)
    for (const [id] of added) expect(special).toContain(id)
    // parse_special off: user-defined tokens are still cut out, control tokens stay text
    const plain = ours.encode(CHAT, { bos: false })
    const userIds = added.filter(([, , t]) => t === TOKEN_TYPE.userDefined).map(([id]) => id)
    const controlIds = added.filter(([, , t]) => t === TOKEN_TYPE.control).map(([id]) => id)
    for (const id of userIds) expect(plain).toContain(id)
    for (const id of controlIds) expect(plain).not.toContain(id)
  })

  it('SPM vocabulary (stories260K): special on finds every one, off finds the user-defined ones', () => {
    const file = openModelFile('models/stories260K.gguf')
    const base = file.vocabulary as Vocabulary
    const n = base.pieces.length
    // replace the last pieces (long merges a short text never needs) by the added tokens
    const added = FAMILY_SPELLINGS.map(([text, type], i): [number, string, number] => [n - 1 - i, text, type])
    const plainTok = createTokenizer(base)
    const tok = createTokenizer(withAdded(base, added))
    const idOf = new Map(added.map(([id, text]) => [text, id]))
    // llama.cpp: a text fragment gets the dummy-prefix space at the start and after a special token
    const text = (s: string): number[] => plainTok.encode(s, { bos: false })
    const want = [
      base.bosId,
      idOf.get('<start_of_turn>'),
      ...text('user\nHi '),
      idOf.get('[INST]'),
      ...text(' there '),
      idOf.get('[/INST]'),
      idOf.get('<|user_tok|>'),
      ...text(' ok'),
      idOf.get('<end_of_turn>'),
      ...text('\n'),
      idOf.get('<|eot_id|>'),
      idOf.get('<extra_id_7>'),
      ...text('x')
    ]
    expect(tok.encode(CHAT, { bos: true, special: true })).toEqual(want)
    const off = tok.encode(CHAT, { bos: false })
    expect(off).toContain(idOf.get('<|user_tok|>'))
    expect(off).toContain(idOf.get('<extra_id_7>'))
    for (const [spelling, type] of FAMILY_SPELLINGS) {
      if (type === TOKEN_TYPE.control) expect(off).not.toContain(idOf.get(spelling))
    }
  })

  it('Qwen 3 and Llama 3 chat tokens as their files type them', () => {
    const qwen = createTokenizer(packageVocabulary('qwen'))
    const hfQwen = hfTokenizer('qwen', { normalizer: false })
    const q = '<|im_start|>user\n<think>cafe\u0301</think><tool_call>x</tool_call><|im_end|>'
    expect(qwen.encode(q, { bos: false, special: true })).toEqual(hfQwen.encode(q, { add_special_tokens: false }).ids)
    const llama = createTokenizer(packageVocabulary('llama3'))
    const hfLlama = hfTokenizer('llama3', { normalizer: false })
    const l = '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|reserved_special_token_5|>'
    expect(llama.encode(l, { bos: false, special: true })).toEqual(hfLlama.encode(l, { add_special_tokens: false }).ids)
  })
})
