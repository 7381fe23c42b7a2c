import type { Tokenizer } from '../tokenizers/tokenizer.js'

/**
 * Every token's bytes in one trie (flat typed arrays), built once per tokenizer. The mask walks
 * it with the grammar's state: a branch the grammar refuses at its first byte drops all tokens
 * under it at once, so a 152k vocabulary costs the nodes the grammar allows, not 152k scans.
 */
export interface VocabTrie {
  readonly vocabSize: number
  /** Bytes of each token (empty for control and unused tokens: never allowed inside JSON). */
  readonly bytes: readonly Uint8Array[]
  readonly stopIds: readonly number[]
  /** Node n's edges are edgeStart[n] .. edgeStart[n+1]-1 (node 0 is the root). */
  readonly edgeStart: Int32Array
  readonly edgeByte: Uint8Array
  readonly edgeChild: Int32Array
  /** First token ending at a node (-1: none), then sameBytes[token] for more with those bytes. */
  readonly tokenAt: Int32Array
  readonly sameBytes: Int32Array
  /** Whether a byte that is not plain string text lies on some path below the node. */
  readonly nonPlainBelow: Uint8Array
  /** The edges a walk inside a string must still follow: a non-plain byte, or one somewhere below. */
  readonly npStart: Int32Array
  readonly npByte: Uint8Array
  readonly npChild: Int32Array
  /** Tokens that are whole characters of string text, by character count ascending, and those counts. */
  readonly plainTokens: Int32Array
  readonly plainChars: Int32Array
}

/**
 * A byte that may stand inside a JSON string (no quote, backslash or control byte); whether a
 * run of them is well-formed UTF-8 the automaton checks as the mask walks (json-automaton.ts).
 */
export const isPlain = (b: number): boolean => b >= 0x20 && b !== 0x22 && b !== 0x5c
const strict = new TextDecoder('utf-8', { fatal: true })
/** Whole characters of string text: no quote, backslash or control byte, well-formed UTF-8. */
function isStringText(b: Uint8Array): boolean {
  for (const x of b) if (x < 0x20 || x === 0x22 || x === 0x5c) return false
  try {
    strict.decode(b)
    return true
  } catch {
    return false
  }
}

const tries = new WeakMap<Tokenizer, VocabTrie>()

export function vocabTrieOf(tokenizer: Tokenizer): VocabTrie {
  let t = tries.get(tokenizer)
  if (!t) {
    const bytes = Array.from({ length: tokenizer.vocabSize }, (_, id) => tokenizer.tokenBytes(id))
    t = buildVocabTrie(bytes, tokenizer.stopIds)
    tries.set(tokenizer, t)
  }
  return t
}

export function buildVocabTrie(bytes: readonly Uint8Array[], stopIds: readonly number[]): VocabTrie {
  // Build on maps, then lay the nodes out breadth-first in flat arrays.
  const children: Map<number, number>[] = [new Map()]
  const ends: number[][] = [[]]
  for (let id = 0; id < bytes.length; id++) {
    const b = bytes[id]
    if (b.length === 0) continue
    let node = 0
    for (const x of b) {
      let next = children[node].get(x)
      if (next === undefined) {
        next = children.length
        children.push(new Map())
        ends.push([])
        children[node].set(x, next)
      }
      node = next
    }
    ends[node].push(id)
  }
  const nodes = children.length
  const edgeStart = new Int32Array(nodes + 1)
  const edgeByte = new Uint8Array(nodes - 1)
  const edgeChild = new Int32Array(nodes - 1)
  let e = 0
  for (let n = 0; n < nodes; n++) {
    edgeStart[n] = e
    for (const [x, c] of [...children[n]].sort((a, b) => a[0] - b[0])) {
      edgeByte[e] = x
      edgeChild[e] = c
      e++
    }
  }
  edgeStart[nodes] = e
  const tokenAt = new Int32Array(nodes).fill(-1)
  const sameBytes = new Int32Array(bytes.length).fill(-1)
  for (let n = 0; n < nodes; n++) {
    const ids = ends[n]
    if (ids.length === 0) continue
    tokenAt[n] = ids[0]
    for (let i = 1; i < ids.length; i++) sameBytes[ids[i - 1]] = ids[i]
  }
  // Children always get higher numbers than their parent: one pass from the end fills the flags.
  const nonPlainBelow = new Uint8Array(nodes)
  for (let n = nodes - 1; n >= 0; n--) {
    for (let k = edgeStart[n]; k < edgeStart[n + 1]; k++) {
      if (!isPlain(edgeByte[k]) || nonPlainBelow[edgeChild[k]]) {
        nonPlainBelow[n] = 1
        break
      }
    }
  }
  const npStart = new Int32Array(nodes + 1)
  const npEdges: number[] = []
  for (let n = 0; n < nodes; n++) {
    npStart[n] = npEdges.length
    for (let k = edgeStart[n]; k < edgeStart[n + 1]; k++)
      if (!isPlain(edgeByte[k]) || nonPlainBelow[edgeChild[k]]) npEdges.push(k)
  }
  npStart[nodes] = npEdges.length
  const plain: Array<[number, number]> = []
  for (let id = 0; id < bytes.length; id++) {
    const b = bytes[id]
    if (b.length === 0 || !isStringText(b)) continue
    let chars = 0
    for (const x of b) if (x < 0x80 || x >= 0xc0) chars++
    plain.push([id, chars])
  }
  plain.sort((a, b) => a[1] - b[1] || a[0] - b[0])
  return {
    vocabSize: bytes.length,
    bytes,
    stopIds,
    edgeStart,
    edgeByte,
    edgeChild,
    tokenAt,
    sameBytes,
    nonPlainBelow,
    npStart,
    npByte: Uint8Array.from(npEdges, (k) => edgeByte[k]),
    npChild: Int32Array.from(npEdges, (k) => edgeChild[k]),
    plainTokens: Int32Array.from(plain, (p) => p[0]),
    plainChars: Int32Array.from(plain, (p) => p[1])
  }
}
