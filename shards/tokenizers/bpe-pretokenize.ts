import { UnsupportedModelError } from '../errors.js'

// Pre-tokenizers of byte-level BPE vocabularies: text is cut into words by regular expressions
// before the merges run, and no merge crosses a word boundary. The expressions are those of
// llama.cpp's llm_tokenizer_bpe (src/llama-vocab.cpp) per `tokenizer.ggml.pre`, which are the
// tokenizer.json `Split` patterns of each family with `(?i:'s|...)` spelled out case by case
// (JavaScript before ES2025 has no inline flag groups). `\s` is Unicode White_Space, as in
// Oniguruma (Hugging Face tokenizers) and llama.cpp: JavaScript's own `\s` adds U+FEFF and
// misses U+0085, so `re()` rewrites it.

/** Llama 3 tokenizer.json Split pattern (numbers in groups of up to 3 digits). */
const LLAMA3 =
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/** Qwen 2 tokenizer.json Split pattern: as Llama 3's, but every digit alone. */
const QWEN2 =
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/** GPT-2's pattern (the ByteLevel pre-tokenizer with use_regex). */
const GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

export interface PreTokenizer {
  /** llama.cpp's pre-tokenizer type this name maps to. */
  readonly kind: 'llama3' | 'qwen2' | 'smollm' | 'gpt2' | 'default'
  /** Applied in turn: each splits every piece the previous one left (matches and gaps). */
  readonly patterns: readonly RegExp[]
  /** tokenizer.json `ignore_merges` (Llama 3): a word that is itself a token is taken whole. */
  readonly ignoreMerges: boolean
}

const re = (source: string): RegExp =>
  new RegExp(source.replaceAll('\\s', '\\p{White_Space}').replaceAll('\\S', '\\P{White_Space}'), 'gu')

/** `tokenizer.ggml.pre` names (llama.cpp llama_vocab::load) grouped by the pre-tokenizer they use. */
const KINDS: Record<PreTokenizer['kind'], readonly string[]> = {
  llama3: ['llama3', 'llama-v3', 'llama-bpe', 'falcon3', 'pixtral', 'dbrx', 'smaug-bpe'],
  qwen2: ['qwen2', 'stablelm2', 'deepseek-r1-qwen'],
  smollm: ['smollm', 'starcoder', 'refact', 'command-r', 'codeshell', 'exaone', 'minerva-7b'],
  gpt2: ['gpt-2', 'phi-2', 'mpt', 'olmo', 'jais'],
  default: ['default']
}

export const SUPPORTED_PRE_TOKENIZERS: readonly string[] = Object.values(KINDS).flat()

/** The pre-tokenizer a GGUF names; no name means llama.cpp's 'default'. */
export function preTokenizerFor(name: string | undefined): PreTokenizer {
  const pre = name ?? 'default'
  const kind = (Object.keys(KINDS) as PreTokenizer['kind'][]).find((k) => KINDS[k].includes(pre))
  switch (kind) {
    case 'llama3':
      return { kind, patterns: [re(LLAMA3)], ignoreMerges: true }
    case 'qwen2':
      return { kind, patterns: [re(QWEN2)], ignoreMerges: false }
    case 'smollm':
      // tokenizer.json: Digits(individual_digits) then ByteLevel(use_regex).
      return { kind, patterns: [re('\\p{N}'), re(GPT2)], ignoreMerges: false }
    case 'gpt2':
      return { kind, patterns: [re(GPT2)], ignoreMerges: false }
    case 'default':
      return {
        kind,
        patterns: [re('[\\p{P}\\$\\+<=>\\^~\\|]+'), re(GPT2), re('\\p{N}+'), re('[0-9][0-9][0-9]')],
        ignoreMerges: false
      }
  }
  throw new UnsupportedModelError(
    `GGUF tokenizer.ggml.pre ${JSON.stringify(pre)} is not supported; supported: ${SUPPORTED_PRE_TOKENIZERS.join(', ')}`
  )
}

/** Cut `text` into words: each pattern splits each piece into its matches and the gaps between. */
export function preTokenize(pre: PreTokenizer, text: string): string[] {
  // No normalisation, for any vocabulary: llama.cpp's BPE session splits the text as given, though
  // Qwen's tokenizer.json has an NFC normalizer (issue 31: llama.cpp's tokens are the reference).
  let pieces = [text]
  for (const pattern of pre.patterns) {
    const next: string[] = []
    for (const piece of pieces) {
      let at = 0
      for (const m of piece.matchAll(pattern)) {
        if (m[0].length === 0) continue
        if (m.index > at) next.push(piece.slice(at, m.index))
        next.push(m[0])
        at = m.index + m[0].length
      }
      if (at < piece.length) next.push(piece.slice(at))
    }
    pieces = next
  }
  return pieces
}
