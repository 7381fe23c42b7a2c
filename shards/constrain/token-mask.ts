import { InvalidArgumentError } from '../errors.js'
import type { Tokenizer } from '../tokenizers/tokenizer.js'
import type { State } from './automaton-state.js'
import { canEnd, initialState, step } from './json-automaton.js'
import type { GrammarNode } from './json-schema.js'
import { minLength, minRemaining } from './min-remaining.js'
import { isPlain, type VocabTrie, vocabTrieOf } from './vocab-trie.js'

/**
 * Constrained sampling (issue 37): before each sample, every token whose bytes the grammar does
 * not allow from the text so far gets logit -∞. The client owns sampling, so the constraint costs
 * the swarm's peers nothing.
 *
 * Budget: a token is allowed only if the text can still become a whole value in the tokens left
 * (at worst one byte a token: every byte is a token of a byte-level vocabulary). A random or
 * rambling model is then closed off in time instead of being cut mid-string by max_tokens.
 */
export interface Constraint {
  /** A decode at the start of the completion, or after the tokens already `kept` (a rollback). */
  start(kept?: readonly number[]): ConstrainedDecode
}

export interface ConstrainedDecode {
  /** Set disallowed logits to -∞; `tokensLeft` counts this step's token. */
  mask(logits: Float32Array, tokensLeft: number): void
  /** The token sampled (a stop id ends it). Throws InvalidArgumentError for a token the grammar refuses. */
  accept(token: number): void
  /** The text so far is a whole value. */
  readonly complete: boolean
  /** Tokens allowed at the last mask() (for tests and the bench). */
  readonly allowedCount: number
}

export function createConstraint(tokenizer: Tokenizer, grammar: GrammarNode): Constraint {
  const trie = vocabTrieOf(tokenizer)
  // what one token can add to the shortest finish at most: its own bytes and a value it opens
  let longest = 0
  for (const b of trie.bytes) longest = Math.max(longest, b.length)
  const farBytes = longest + largestValue(grammar) + 8
  return {
    start(kept = []) {
      const d = new Decode(trie, initialState(grammar), farBytes)
      for (const t of kept) d.accept(t)
      return d
    }
  }
}

class Decode implements ConstrainedDecode {
  private readonly allowed: Uint8Array
  allowedCount = 0
  private ended = false
  private cache?: { up: State | null; allowed: Uint8Array; count: number }

  constructor(
    private readonly trie: VocabTrie,
    private state: State,
    private readonly farBytes: number
  ) {
    this.allowed = new Uint8Array(trie.vocabSize)
  }

  get complete(): boolean {
    return canEnd(this.state)
  }

  mask(logits: Float32Array, tokensLeft: number): void {
    const allowed = this.allowed
    const budget = Math.max(0, tokensLeft - 1)
    let count = this.ended ? 0 : this.markCached(budget)
    // Not sure to finish in time at one byte a token (the shortest value is longer than the
    // tokens left): only tokens that bring the end nearer, so strings close and no new item
    // opens; multi-byte tokens usually finish it. Failing that, the grammar alone.
    // (the largest step some token takes first: a multi-byte token of a literal wrapper)
    const rest = minRemaining(this.state)
    for (const stride of [16, 8, 4, 2, 1]) {
      if (count > 0 || this.ended || stride > rest) continue
      count = markAllowed(this.trie, this.state, rest - stride, allowed)
    }
    if (count === 0 && !this.ended) count = markAllowed(this.trie, this.state, Number.POSITIVE_INFINITY, allowed)
    if (this.ended || canEnd(this.state) || count === 0) for (const id of this.trie.stopIds) allowed[id] = 1
    this.allowedCount = count
    const n = Math.min(logits.length, allowed.length)
    for (let i = 0; i < n; i++) if (allowed[i] === 0) logits[i] = Number.NEGATIVE_INFINITY
    for (let i = n; i < logits.length; i++) logits[i] = Number.NEGATIVE_INFINITY
  }

  /**
   * Inside a free string far from the budget the allowed set does not change from token to
   * token (the string's frame is new, the stack under it the same object): walk once per string.
   */
  private markCached(budget: number): number {
    const s = this.state
    const f = s.f
    const free = f.t === 'STR' && f.esc === 0 && (f.u ?? 0) === 0 && f.max === Number.POSITIVE_INFINITY && f.len >= f.min
    if (!free || budget < minRemaining(s) + this.farBytes) return markAllowed(this.trie, s, budget, this.allowed)
    if (this.cache?.up !== s.up) {
      const count = markAllowed(this.trie, s, Number.POSITIVE_INFINITY, this.allowed)
      this.cache = { up: s.up, allowed: this.allowed.slice(), count }
      return count
    }
    this.allowed.set(this.cache.allowed)
    return this.cache.count
  }

  accept(token: number): void {
    if (this.trie.stopIds.includes(token)) {
      this.ended = true
      return
    }
    const bytes = this.trie.bytes[token]
    if (!bytes || bytes.length === 0) throw new InvalidArgumentError(`token ${token} has no text the grammar allows`)
    let s: State | null = this.state
    for (let i = 0; i < bytes.length && s; i++) s = step(s, bytes[i])
    if (!s) throw new InvalidArgumentError(`token ${token} does not continue the constrained output`)
    this.state = s
  }
}

/**
 * Fill `allowed` (zeroed first) with the tokens the grammar allows from `s` after which at most
 * `budget` bytes are needed to finish the value; returns how many.
 */
export function markAllowed(trie: VocabTrie, s: State, budget: number, allowed: Uint8Array): number {
  allowed.fill(0)
  let count = 0
  const { edgeStart, edgeByte, edgeChild, tokenAt, sameBytes } = trie
  const markAt = (node: number): void => {
    for (let id = tokenAt[node]; id !== -1; id = sameBytes[id]) {
      if (allowed[id] === 0) count++
      allowed[id] = 1
    }
  }
  // Inside a free-running string, a token of plain text only keeps it a string: those are marked
  // from the precomputed list, and the walk follows only branches that hold a quote, a backslash
  // or a control byte somewhere below (a few thousand nodes, not the whole trie).
  const top = s.f
  const inString = top.t === 'STR' && top.esc === 0 && (top.u ?? 0) === 0
  if (inString) {
    const room = top.max - top.len
    const rest = minRemaining(s)
    const short = Math.max(0, top.min - top.len)
    const { plainTokens, plainChars } = trie
    for (let i = 0; i < plainTokens.length && plainChars[i] <= room; i++) {
      if (rest - Math.min(plainChars[i], short) > budget) continue
      if (budget < 0) break
      allowed[plainTokens[i]] = 1
      count++
    }
  }
  const { npStart, npByte, npChild } = trie
  const walk = (node: number, st: State): void => {
    for (let k = edgeStart[node]; k < edgeStart[node + 1]; k++) {
      const next = step(st, edgeByte[k])
      if (!next) continue
      const child = edgeChild[k]
      if (tokenAt[child] !== -1 && (budget === Number.POSITIVE_INFINITY || minRemaining(next) <= budget)) markAt(child)
      walk(child, next)
    }
  }
  // along plain bytes inside the string: only edges with a non-plain byte on or below them
  const walkPlain = (node: number, st: State): void => {
    for (let k = npStart[node]; k < npStart[node + 1]; k++) {
      const b = npByte[k]
      const next = step(st, b)
      if (!next) continue
      const child = npChild[k]
      if (isPlain(b)) walkPlain(child, next)
      else {
        if (tokenAt[child] !== -1 && (budget === Number.POSITIVE_INFINITY || minRemaining(next) <= budget)) markAt(child)
        walk(child, next)
      }
    }
  }
  if (inString) walkPlain(0, s)
  else walk(0, s)
  return count
}

/** The longest shortest-text of any node in the grammar (what opening a value can cost at most). */
function largestValue(root: GrammarNode): number {
  const seen = new Set<GrammarNode>()
  let most = 0
  const visit = (n: GrammarNode): void => {
    if (seen.has(n)) return
    seen.add(n)
    most = Math.max(most, minLength(n))
    if (n.k === 'obj') for (const p of n.props) visit(p.node)
    if (n.k === 'obj' && n.free) visit(n.free)
    if (n.k === 'arr') visit(n.items)
    if (n.k === 'alt') n.options.forEach(visit)
    if (n.k === 'seq') n.parts.forEach(visit)
    if (n.k === 'lit') n.next?.forEach(visit)
  }
  visit(root)
  return most
}
