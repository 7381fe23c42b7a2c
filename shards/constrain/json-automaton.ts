import {
  A_AFTER,
  A_NEXT,
  A_OPEN,
  A_VAL,
  type Frame,
  type LitNode,
  O_AFTER,
  O_COLON,
  O_COMMA,
  O_FKEY,
  O_KEY,
  O_OPEN,
  O_VAL,
  type ObjNode,
  push,
  type State
} from './automaton-state.js'
import type { GrammarNode } from './json-schema.js'
import { requiredFrom } from './min-remaining.js'

/**
 * The grammar of json-schema.ts as a byte-at-a-time pushdown automaton (issue 37): `step` takes
 * one byte more, `canEnd` says whether the text is a whole value. The stack types live in
 * automaton-state.ts, the fewest-bytes-to-close computation in min-remaining.ts.
 */

/** Digits of a number at most: a random model would otherwise write digits until the budget ends. */
const MAX_DIGITS = 15
/** Exponent digits at most: 1e999 parses as Infinity, which is not a JSON number. */
const MAX_EXPONENT_DIGITS = 2

const Q = 0x22
const BS = 0x5c
const ANY_LITS: LitNode = { k: 'lit', options: ['true', 'false', 'null'].map((s) => new TextEncoder().encode(s)) }
const ESCAPES = new Set([...'"\\/bfnrt'].map((c) => c.charCodeAt(0)))
const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39
const isHex = (b: number): boolean => isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)

export function initialState(root: GrammarNode): State {
  return push(push(null, { t: 'ROOT' }), { t: 'V', n: root })
}

/** Candidate props for the next key: from i up to and including the first required one. */
function keyCandidates(n: ObjNode, i: number): number[] {
  const out: number[] = []
  for (let j = i; j < n.props.length; j++) {
    out.push(j)
    if (n.props[j].required) break
  }
  return out
}

/** A value of `n` starts with byte b, on top of `up`. */
function startValue(up: State, n: GrammarNode, b: number): State | null {
  switch (n.k) {
    case 'any':
      if (b === 0x7b && n.depth > 0)
        return push(up, { t: 'OBJ', n: { k: 'obj', props: [], free: { k: 'any', depth: n.depth - 1 } }, i: 0, ph: O_OPEN })
      if (b === 0x5b && n.depth > 0)
        return push(up, {
          t: 'ARR',
          n: { k: 'arr', items: { k: 'any', depth: n.depth - 1 }, min: 0, max: Number.POSITIVE_INFINITY },
          c: 0,
          ph: A_OPEN
        })
      if (b === Q) return push(up, { t: 'STR', min: 0, max: Number.POSITIVE_INFINITY, len: 0, esc: 0 })
      if (b === 0x2d || isDigit(b)) return startValue(up, { k: 'num', integer: false }, b)
      return startValue(up, ANY_LITS, b)
    case 'obj':
      return b === 0x7b ? push(up, { t: 'OBJ', n, i: 0, ph: O_OPEN }) : null
    case 'arr':
      return b === 0x5b ? push(up, { t: 'ARR', n, c: 0, ph: A_OPEN }) : null
    case 'str':
      return b === Q ? push(up, { t: 'STR', min: n.min, max: n.max, len: 0, esc: 0 }) : null
    case 'num':
      if (b === 0x2d) return push(up, { t: 'NUM', int: n.integer, ph: 0, nd: 0 })
      if (b === 0x30) return push(up, { t: 'NUM', int: n.integer, ph: 1, nd: 1 })
      return isDigit(b) ? push(up, { t: 'NUM', int: n.integer, ph: 2, nd: 1 }) : null
    case 'lit': {
      const cand: number[] = []
      for (let j = 0; j < n.options.length; j++) if (n.options[j][0] === b) cand.push(j)
      return cand.length === 0 ? null : litAdvanced(up, n, cand, 1)
    }
    case 'alt':
      // The first option a byte can start wins: options of one schema differ in their first
      // byte in practice (type unions); two object options would take the first.
      for (const o of n.options) {
        const s = startValue(up, o, b)
        if (s) return s
      }
      return null
    case 'seq':
      return startValue(push(up, { t: 'SEQ', n, i: 0 }), n.parts[0], b)
  }
}

/** A literal matched `off` bytes of its candidates: finish at once when every candidate is whole. */
function litAdvanced(up: State, n: LitNode, cand: number[], off: number): State | null {
  if (cand.every((j) => n.options[j].length === off)) return litDone(up, n, cand[0])
  return push(up, { t: 'LIT', n, cand, off })
}

function litDone(up: State, n: LitNode, j: number): State | null {
  return n.next ? push(up, { t: 'V', n: n.next[j] }) : done(up)
}

/** The value on top of `up` is complete: `up` moves on. */
function done(up: State | null): State | null {
  if (!up) return null
  const f = up.f
  switch (f.t) {
    case 'ROOT':
      return push(null, { t: 'END' })
    case 'OBJ':
      return push(up.up, { ...f, ph: f.ph === O_FKEY ? O_COLON : O_AFTER })
    case 'ARR':
      return push(up.up, { ...f, c: f.c + 1, ph: A_AFTER })
    case 'SEQ': {
      const i = f.i + 1
      if (i === f.n.parts.length) return done(up.up)
      return push(push(up.up, { t: 'SEQ', n: f.n, i }), { t: 'V', n: f.n.parts[i] })
    }
    default:
      return null
  }
}

/** A scalar on top that could end here (a number, a literal with a whole candidate): its end. */
function endScalar(s: State): State | null {
  const f = s.f
  if (f.t === 'NUM') return f.ph === 1 || f.ph === 2 || f.ph === 4 || f.ph === 7 ? done(s.up) : null
  if (f.t === 'LIT') {
    const j = f.cand.find((c) => f.n.options[c].length === f.off)
    return j === undefined ? null : litDone(s.up as State, f.n, j)
  }
  return null
}

/** Whether the text so far is a whole value (the generation may stop here). */
export function canEnd(s: State): boolean {
  if (s.f.t === 'END') return true
  return endScalar(s)?.f.t === 'END'
}

/** One byte more; null when the grammar does not allow it. */
export function step(s: State, b: number): State | null {
  const f = s.f
  switch (f.t) {
    case 'V':
      return startValue(s.up as State, f.n, b)
    case 'ROOT':
    case 'END':
    case 'SEQ':
      return null
    case 'STR': {
      if (f.esc === 1) {
        if (ESCAPES.has(b)) return push(s.up, { ...f, esc: 0 })
        return b === 0x75 ? push(s.up, { ...f, esc: 2 }) : null
      }
      if (f.esc >= 2) return isHex(b) ? push(s.up, { ...f, esc: f.esc === 5 ? 0 : f.esc + 1 }) : null
      const u = f.u ?? 0
      // well-formed UTF-8 only: a stray byte would decode to U+FFFD, a character the schema's
      // length never counted
      if (u > 0) return b >= (f.lo as number) && b <= (f.hi as number) ? push(s.up, { ...f, u: u - 1, lo: 0x80, hi: 0xbf }) : null
      if (b === Q) return f.len >= f.min ? done(s.up) : null
      if (b < 0x20 || (b >= 0x80 && b < 0xc2) || b > 0xf4) return null
      // a free string past its minimum: the length no longer matters, the state stays the same
      // object (the mask walks thousands of such steps; no allocation for them)
      if (b < 0x80 && f.max === Number.POSITIVE_INFINITY && f.len >= f.min && b !== BS) return s
      if (f.len + 1 > f.max) return null
      if (b < 0x80) return push(s.up, { ...f, len: f.len + 1, esc: b === BS ? 1 : 0 })
      const need = b < 0xe0 ? 1 : b < 0xf0 ? 2 : 3
      const lo = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80
      const hi = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf
      return push(s.up, { ...f, len: f.len + 1, u: need, lo, hi })
    }
    case 'NUM':
      return stepNumber(s, f, b)
    case 'LIT': {
      const cand = f.cand.filter((j) => f.n.options[j].length > f.off && f.n.options[j][f.off] === b)
      if (cand.length > 0) return litAdvanced(s.up as State, f.n, cand, f.off + 1)
      const end = endScalar(s)
      return end ? step(end, b) : null
    }
    case 'ARR':
      return stepArray(s, f, b)
    case 'OBJ':
      return stepObject(s, f, b)
  }
}

function stepNumber(s: State, f: Extract<Frame, { t: 'NUM' }>, b: number): State | null {
  const to = (ph: number, nd = f.nd): State => push(s.up, { ...f, ph, nd })
  const digit = isDigit(b)
  switch (f.ph) {
    case 0: // after '-'
      return b === 0x30 ? to(1, 1) : digit ? to(2, 1) : null
    case 3: // after '.'
      return digit ? to(4, f.nd + 1) : null
    case 5: // after 'e' (nd counts exponent digits from here)
      return b === 0x2b || b === 0x2d ? to(6, 0) : digit ? to(7, 1) : null
    case 6:
      return digit ? to(7, 1) : null
  }
  if (digit && f.ph !== 1 && f.nd < (f.ph === 7 ? MAX_EXPONENT_DIGITS : MAX_DIGITS)) return to(f.ph, f.nd + 1)
  if (!f.int && b === 0x2e && (f.ph === 1 || f.ph === 2)) return to(3)
  if (!f.int && (b === 0x65 || b === 0x45) && f.ph !== 7) return to(5, 0)
  const end = done(s.up)
  return end ? step(end, b) : null
}

function stepArray(s: State, f: Extract<Frame, { t: 'ARR' }>, b: number): State | null {
  const { n } = f
  if (f.ph === A_AFTER) {
    if (b === 0x2c && f.c < n.max) return push(s.up, { ...f, ph: A_NEXT })
    return b === 0x5d && f.c >= n.min ? done(s.up) : null
  }
  if (f.ph === A_OPEN && b === 0x5d) return n.min === 0 ? done(s.up) : null
  if (f.ph === A_OPEN && n.max === 0) return null
  return startValue(push(s.up, { ...f, ph: A_VAL }), n.items, b)
}

function stepObject(s: State, f: Extract<Frame, { t: 'OBJ' }>, b: number): State | null {
  const { n } = f
  switch (f.ph) {
    case O_OPEN:
    case O_AFTER:
      if (b === 0x7d) return requiredFrom(n, f.i).count === 0 ? done(s.up) : null
      if (f.ph === O_AFTER) return b === 0x2c && (n.free || f.i < n.props.length) ? push(s.up, { ...f, ph: O_COMMA }) : null
      return startKey(s, f, b)
    case O_COMMA:
      return startKey(s, f, b)
    case O_KEY: {
      const off = f.off as number
      const cand = (f.cand as number[]).filter((j) => n.props[j].key[off] === b)
      if (cand.length === 0) return null
      const whole = cand.find((j) => n.props[j].key.length === off + 1)
      if (whole === undefined) return push(s.up, { ...f, cand, off: off + 1 })
      return push(push(s.up, { t: 'OBJ', n, i: whole + 1, ph: O_VAL }), { t: 'V', n: n.props[whole].node })
    }
    case O_COLON:
      return b === 0x3a ? push(push(s.up, { ...f, ph: O_VAL }), { t: 'V', n: n.free as GrammarNode }) : null
  }
  return null
}

function startKey(s: State, f: Extract<Frame, { t: 'OBJ' }>, b: number): State | null {
  if (b !== Q) return null
  if (f.n.free) return push(push(s.up, { ...f, ph: O_FKEY }), { t: 'STR', min: 0, max: Number.POSITIVE_INFINITY, len: 0, esc: 0 })
  const cand = keyCandidates(f.n, f.i)
  return cand.length === 0 ? null : push(s.up, { ...f, ph: O_KEY, cand, off: 1 })
}
