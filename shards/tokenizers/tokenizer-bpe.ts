import { InvalidModelError } from '../errors.js'
import type { Vocabulary } from '../types.js'
import { type PreTokenizer, preTokenize, preTokenizerFor } from './bpe-pretokenize.js'
import { createSpecialSplitter, TOKEN_TYPE } from './tokenizer-special.js'

/**
 * GPT-2's bytes_to_unicode (openai/gpt-2 encoder.py): printable Latin-1 bytes stand for
 * themselves, the other 68 bytes for U+0100.. in order, so every byte string is a string of
 * visible characters. Byte-level BPE vocabularies (`tokenizer.ggml.model = gpt2`) are in this form.
 */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const out: string[] = new Array(256)
  let extra = 0
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
    out[b] = String.fromCharCode(printable ? b : 256 + extra++)
  }
  return out
})()

const CHAR_TO_BYTE = new Map<string, number>(BYTE_TO_CHAR.map((c, b) => [c, b]))

/** The byte-level form of `text`'s UTF-8. */
export function toByteLevel(text: string, utf8 = new TextEncoder()): string {
  let out = ''
  for (const b of utf8.encode(text)) out += BYTE_TO_CHAR[b]
  return out
}

/** The bytes a byte-level piece stands for (characters outside the map as their own UTF-8). */
export function fromByteLevel(piece: string, utf8 = new TextEncoder()): Uint8Array {
  const out: number[] = []
  for (const ch of piece) {
    const b = CHAR_TO_BYTE.get(ch)
    if (b !== undefined) out.push(b)
    else out.push(...utf8.encode(ch))
  }
  return Uint8Array.from(out)
}

/** Candidate merge of symbols `left` and its right neighbour `right`, by merge rank. */
interface Pair {
  readonly rank: number
  readonly left: number
  readonly right: number
  readonly leftVersion: number
  readonly rightVersion: number
}

/** Lowest rank first, leftmost on ties (llama.cpp llm_bigram_bpe::comparator, HF Word::merge_all). */
function before(a: Pair, b: Pair): boolean {
  return a.rank < b.rank || (a.rank === b.rank && a.left < b.left)
}

function heapPush(a: Pair[], p: Pair): void {
  a.push(p)
  for (let i = a.length - 1; i > 0; ) {
    const parent = (i - 1) >> 1
    if (!before(a[i], a[parent])) break
    ;[a[i], a[parent]] = [a[parent], a[i]]
    i = parent
  }
}

function heapPop(a: Pair[]): Pair | undefined {
  const top = a[0]
  const last = a.pop()
  if (a.length > 0 && last !== undefined) {
    a[0] = last
    for (let i = 0; ; ) {
      const l = 2 * i + 1
      let m = i
      if (l < a.length && before(a[l], a[m])) m = l
      if (l + 1 < a.length && before(a[l + 1], a[m])) m = l + 1
      if (m === i) break
      ;[a[i], a[m]] = [a[m], a[i]]
      i = m
    }
  }
  return top
}

/** Words seen before are not merged again (as Hugging Face's BPE cache); bounded. */
const WORD_CACHE_ENTRIES = 10_000

export interface BpeEncoder {
  readonly pre: PreTokenizer
  /** Token ids of `text`, special tokens found as `special` asks (no BOS/EOS). */
  encodeText(text: string, special: boolean): number[]
  /** Decoded bytes of each token (control and unused tokens decode to nothing). */
  readonly tokenBytes: readonly Uint8Array[]
}

/**
 * Byte-level BPE over a GGUF `gpt2` vocabulary, as llama.cpp's llm_tokenizer_bpe_session does:
 * split out special tokens, pre-tokenize into words, map each word's UTF-8 to byte-level
 * characters, then merge adjacent symbols lowest merge rank first until no pair is a merge.
 * A symbol left that is not a token falls back to one token per character.
 */
export function createBpeEncoder(vocab: Vocabulary): BpeEncoder {
  const { pieces, types } = vocab
  const merges = vocab.merges
  if (!merges || merges.length === 0) throw new InvalidModelError('GGUF gpt2 tokenizer has no tokenizer.ggml.merges')
  const pre = preTokenizerFor(vocab.pre)
  const utf8 = new TextEncoder()
  const idOf = new Map<string, number>()
  for (let id = 0; id < pieces.length; id++) {
    const t = types?.[id]
    // Control and user-defined tokens are matched as whole strings by the splitter, not merged to.
    if (t === TOKEN_TYPE.control || t === TOKEN_TYPE.userDefined || t === TOKEN_TYPE.unused) continue
    if (!idOf.has(pieces[id])) idOf.set(pieces[id], id)
  }
  const rankOf = new Map<string, number>()
  merges.forEach((m, rank) => {
    if (!rankOf.has(m)) rankOf.set(m, rank)
  })
  const split = createSpecialSplitter(pieces, types)
  const cache = new Map<string, number[]>()

  const tokenBytes = pieces.map((piece, id): Uint8Array => {
    switch (types?.[id]) {
      case TOKEN_TYPE.control:
      case TOKEN_TYPE.unused:
        return new Uint8Array(0)
      case TOKEN_TYPE.userDefined:
        return utf8.encode(piece) // stored as plain text by the converter
      case TOKEN_TYPE.byte: {
        const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece)
        return m ? Uint8Array.of(Number.parseInt(m[1], 16)) : fromByteLevel(piece, utf8)
      }
      default:
        return fromByteLevel(piece, utf8)
    }
  })

  function mergeWord(word: string): number[] {
    const whole = pre.ignoreMerges ? idOf.get(word) : undefined
    if (whole !== undefined) return [whole]
    const sym = Array.from(word)
    const n = sym.length
    const next = Int32Array.from({ length: n }, (_, i) => i + 1)
    const prev = Int32Array.from({ length: n }, (_, i) => i - 1)
    const version = new Uint32Array(n)
    const heap: Pair[] = []
    const consider = (left: number, right: number): void => {
      if (left < 0 || right >= n) return
      const rank = rankOf.get(`${sym[left]} ${sym[right]}`)
      if (rank === undefined) return
      heapPush(heap, { rank, left, right, leftVersion: version[left], rightVersion: version[right] })
    }
    for (let i = 0; i + 1 < n; i++) consider(i, i + 1)
    for (let p = heapPop(heap); p !== undefined; p = heapPop(heap)) {
      const { left, right } = p
      if (version[left] !== p.leftVersion || version[right] !== p.rightVersion) continue
      sym[left] += sym[right]
      version[left]++
      version[right]++
      next[left] = next[right]
      if (next[left] < n) prev[next[left]] = left
      consider(prev[left], left)
      consider(left, next[left])
    }
    const out: number[] = []
    for (let i = 0; i < n; i = next[i]) {
      const id = idOf.get(sym[i])
      if (id !== undefined) out.push(id)
      else
        for (const ch of sym[i]) {
          const single = idOf.get(ch)
          if (single !== undefined) out.push(single)
        }
    }
    return out
  }

  function encodeText(text: string, special: boolean): number[] {
    const out: number[] = []
    for (const fragment of split(text, special)) {
      if (typeof fragment === 'number') {
        out.push(fragment)
        continue
      }
      for (const word of preTokenize(pre, fragment)) {
        const key = toByteLevel(word, utf8)
        let ids = cache.get(key)
        if (ids === undefined) {
          ids = mergeWord(key)
          if (cache.size >= WORD_CACHE_ENTRIES) cache.clear()
          cache.set(key, ids)
        }
        for (const id of ids) out.push(id)
      }
    }
    return out
  }

  return { pre, encodeText, tokenBytes }
}
