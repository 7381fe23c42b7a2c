import type { GrammarNode } from './json-schema.js'

/**
 * The stack the JSON automaton (json-automaton.ts) walks: its frame and state types, the phase
 * numbers of object and array frames, and `push`. Shared by the stepping code and the
 * fewest-bytes-to-close computation (min-remaining.ts), so neither imports the other's internals.
 *
 * A state is an immutable stack (frames linked to their parent), so the token mask (token-mask.ts)
 * branches at every trie node for the cost of one small object, and a rollback restarts from any
 * earlier state (issue 37).
 */
export type Frame =
  | { readonly t: 'ROOT' }
  | { readonly t: 'END' }
  | { readonly t: 'V'; readonly n: GrammarNode }
  | {
      readonly t: 'OBJ'
      readonly n: ObjNode
      readonly i: number
      readonly ph: number
      readonly cand?: number[]
      readonly off?: number
    }
  | { readonly t: 'ARR'; readonly n: ArrNode; readonly c: number; readonly ph: number }
  /** u: UTF-8 continuation bytes still due, the next one in [lo, hi] (RFC 3629 table 3-7). */
  | {
      readonly t: 'STR'
      readonly min: number
      readonly max: number
      readonly len: number
      readonly esc: number
      readonly u?: number
      readonly lo?: number
      readonly hi?: number
    }
  | { readonly t: 'NUM'; readonly int: boolean; readonly ph: number; readonly nd: number }
  | { readonly t: 'LIT'; readonly n: LitNode; readonly cand: number[]; readonly off: number }
  | { readonly t: 'SEQ'; readonly n: SeqNode; readonly i: number }

export interface State {
  readonly f: Frame
  readonly up: State | null
}

export type ObjNode = Extract<GrammarNode, { k: 'obj' }>
export type ArrNode = Extract<GrammarNode, { k: 'arr' }>
export type LitNode = Extract<GrammarNode, { k: 'lit' }>
export type SeqNode = Extract<GrammarNode, { k: 'seq' }>

// OBJ phases: after '{', value pending, after a value, after ',', in a declared key, in a free key, before ':'
export const O_OPEN = 0
export const O_VAL = 1
export const O_AFTER = 2
export const O_COMMA = 3
export const O_KEY = 4
export const O_FKEY = 5
export const O_COLON = 6
// ARR phases: after '[', value pending, after a value, after ','
export const A_OPEN = 0
export const A_VAL = 1
export const A_AFTER = 2
export const A_NEXT = 3

export const push = (up: State | null, f: Frame): State => ({ f, up })
