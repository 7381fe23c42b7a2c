import { InvalidArgumentError } from '../errors.js'
import type { Vocabulary } from '../types.js'
import { createGpt2Tokenizer } from './tokenizer-gpt2.js'
import { createSpecialSplitter } from './tokenizer-special.js'
import { idChecker, streamDecoder } from './tokenizer-stream.js'
import type { EncodeOptions, StreamDecoder, Tokenizer } from './tokenizer-types.js'

export type { EncodeOptions, StreamDecoder, Tokenizer }

/** SentencePiece token type of control tokens (sentencepiece_model.proto ModelProto.Type). */
const TYPE_CONTROL = 3
/** run.c `float best_score = -1e10`: merges scoring at or below this are never taken. */
const MIN_MERGE_SCORE = -1e10
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/

/** A candidate merge of the adjacent symbols `left` and `right` into token `id`. */
interface Pair {
  readonly score: number
  readonly left: number
  readonly right: number
  readonly id: number
  readonly leftVersion: number
  readonly rightVersion: number
}

/** run.c takes the highest score, and on ties the leftmost pair (strict `>` in its scan). */
function before(a: Pair, b: Pair): boolean {
  return a.score > b.score || (a.score === b.score && a.left < b.left)
}

/** Binary max-heap of pairs ordered by `before`. */
class PairHeap {
  private readonly items: Pair[] = []

  push(p: Pair): void {
    const a = this.items
    a.push(p)
    let i = a.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(a[i], a[parent])) break
      ;[a[i], a[parent]] = [a[parent], a[i]]
      i = parent
    }
  }

  pop(): Pair | undefined {
    const a = this.items
    const top = a[0]
    const last = a.pop()
    if (a.length > 0 && last !== undefined) {
      a[0] = last
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < a.length && before(a[l], a[m])) m = l
        if (r < a.length && before(a[r], a[m])) m = r
        if (m === i) break
        ;[a[i], a[m]] = [a[m], a[i]]
        i = m
      }
    }
    return top
  }
}

function checkVocabulary(vocab: Vocabulary): void {
  const n = vocab.pieces.length
  if (n === 0) throw new InvalidArgumentError('vocabulary is empty')
  if (vocab.scores.length !== n) {
    throw new InvalidArgumentError(`vocabulary has ${n} pieces but ${vocab.scores.length} scores`)
  }
  if (vocab.types && vocab.types.length !== n) {
    throw new InvalidArgumentError(`vocabulary has ${n} pieces but ${vocab.types.length} types`)
  }
  const specials: [string, number][] = [
    ['bosId', vocab.bosId],
    ['eosId', vocab.eosId],
    ['unkId', vocab.unkId],
    ...vocab.stopIds.map((id): [string, number] => ['stopIds', id])
  ]
  for (const [name, id] of specials) {
    if (!Number.isInteger(id) || id < 0 || id >= n) {
      throw new InvalidArgumentError(`vocabulary ${name} ${id} is not a token id below ${n}`)
    }
  }
}

/** The tokenizer of a model's vocabulary (SentencePiece BPE, or GPT-2 byte-level BPE when the vocabulary says so). */
export function createTokenizer(vocab: Vocabulary): Tokenizer {
  checkVocabulary(vocab)
  return vocab.model === 'gpt2' ? createGpt2Tokenizer(vocab) : createSpmTokenizer(vocab)
}

function createSpmTokenizer(vocab: Vocabulary): Tokenizer {
  const { pieces, scores, bosId, eosId, unkId } = vocab
  const vocabSize = pieces.length
  const utf8 = new TextEncoder()

  // run.c looks pieces up by binary search over a sorted copy; a Map gives the same exact-match
  // answers. On duplicate pieces the lowest id wins (run.c's bsearch leaves it unspecified).
  const idOf = new Map<string, number>()
  for (let id = 0; id < vocabSize; id++) if (!idOf.has(pieces[id])) idOf.set(pieces[id], id)

  // run.c falls back to id byte+3 (the Llama layout); looking `<0xNN>` up works for any
  // vocabulary, and a vocabulary without byte pieces gets UNK, as SentencePiece does.
  const byteIds = Int32Array.from({ length: 256 }, (_, b) => {
    return idOf.get(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`) ?? unkId
  })

  // Decoded bytes of each token: byte pieces are one raw byte (run.c decode's sscanf of
  // "<0x%02hhX>"), control tokens are nothing, everything else is the piece's UTF-8.
  const tokenBytes = pieces.map((piece, id) => {
    const isControl = vocab.types ? vocab.types[id] === TYPE_CONTROL : false
    if (isControl || id === bosId || id === eosId) return new Uint8Array(0)
    const byte = BYTE_PIECE.exec(piece)
    return byte ? Uint8Array.of(Number.parseInt(byte[1], 16)) : utf8.encode(piece)
  })

  const checkId = idChecker(vocabSize)
  const split = createSpecialSplitter(pieces, vocab.types)

  /** A piece's id, else its UTF-8 bytes as byte tokens (run.c encode's codepoint step). */
  function pushPiece(out: number[], piece: string): void {
    const id = idOf.get(piece)
    if (id !== undefined) out.push(id)
    else for (const b of utf8.encode(piece)) out.push(byteIds[b])
  }

  /**
   * run.c's merge loop: while some adjacent pair concatenates to a piece, replace the pair with
   * the highest-scoring such piece (leftmost on ties). run.c rescans all pairs per merge
   * (quadratic); a heap of candidate pairs over a linked list picks the same pair each step.
   * Stale entries (a side already merged away) are recognised by per-symbol versions.
   */
  function merge(tokens: number[]): number[] {
    const n = tokens.length
    const tok = Int32Array.from(tokens)
    const next = Int32Array.from({ length: n }, (_, i) => i + 1)
    const prev = Int32Array.from({ length: n }, (_, i) => i - 1)
    const version = new Uint32Array(n)
    const heap = new PairHeap()
    const consider = (left: number, right: number): void => {
      if (left < 0 || right >= n) return
      const id = idOf.get(pieces[tok[left]] + pieces[tok[right]])
      if (id === undefined || !(scores[id] > MIN_MERGE_SCORE)) return
      const leftVersion = version[left]
      const rightVersion = version[right]
      heap.push({ score: scores[id], left, right, id, leftVersion, rightVersion })
    }
    for (let i = 0; i + 1 < n; i++) consider(i, i + 1)
    for (let p = heap.pop(); p !== undefined; p = heap.pop()) {
      const { left, right } = p
      if (version[left] !== p.leftVersion || version[right] !== p.rightVersion) continue
      tok[left] = p.id
      version[left]++
      version[right]++ // `right` is gone: no pair built on it may fire again
      next[left] = next[right]
      if (next[left] < n) prev[next[left]] = left
      consider(prev[left], left)
      consider(left, next[left])
    }
    const out: number[] = []
    for (let i = 0; i < n; i = next[i]) out.push(tok[i])
    return out
  }

  function encodeText(text: string, bos: boolean): number[] {
    const tokens: number[] = []
    if (bos) tokens.push(bosId)
    // SentencePiece's add_dummy_prefix, as run.c does it: a separate " " token before
    // non-empty text, which the merges then fuse with the first word.
    if (text.length > 0) pushPiece(tokens, ' ')
    // One codepoint at a time (run.c groups UTF-8 bytes the same way). A lone surrogate is
    // never a piece and falls back to the bytes of U+FFFD, which is what TextEncoder makes of it.
    for (const ch of text) pushPiece(tokens, ch)
    // BOS takes part in the merges as in run.c; no vocabulary has a piece starting with it.
    return merge(tokens)
  }

  function encode(text: string, options: EncodeOptions = {}): number[] {
    if (typeof text !== 'string') throw new InvalidArgumentError('encode() needs a string')
    const bos = options.bos ?? vocab.addBos ?? true
    // llama.cpp tokenizer_st_partition: user-defined tokens are cut out of any text, control ones
    // only with `special` (issue 31); text after such a token gets the dummy prefix again.
    const fragments = split(text, options.special ?? false)
    let merged: number[]
    if (fragments.every((f) => typeof f === 'string')) merged = encodeText(text, bos)
    else {
      merged = bos ? [bosId] : []
      for (const fragment of fragments) {
        if (typeof fragment === 'number') merged.push(fragment)
        else merged.push(...encodeText(fragment, false))
      }
    }
    if (options.eos ?? vocab.addEos ?? false) merged.push(eosId)
    return merged
  }

  function createDecoder(): StreamDecoder {
    // run.c decode(): after BOS, SentencePiece strips the piece's leading space (PR #89).
    // The check is on the piece itself, so the byte token <0x20> is never stripped.
    return streamDecoder(tokenBytes, checkId, (id, prevId, bytes) =>
      prevId === bosId && pieces[id].startsWith(' ') ? bytes.subarray(1) : bytes
    )
  }

  function decode(ids: readonly number[]): string {
    const stream = createDecoder()
    let text = ''
    for (let i = 0; i < ids.length; i++) text += stream.push(ids[i], i > 0 ? ids[i - 1] : -1)
    return text + stream.flush()
  }

  return {
    kind: 'llama',
    vocabSize,
    bosId,
    eosId,
    stopIds: vocab.stopIds,
    encode,
    decode,
    createDecoder,
    pieceOf(id: number): string {
      checkId(id, 'token')
      return pieces[id]
    },
    tokenBytes(id: number): Uint8Array {
      checkId(id, 'token')
      return tokenBytes[id]
    }
  }
}
