import type { GrammarNode } from './json-schema.js'

/**
 * The grammar of json-schema.ts as a byte-at-a-time pushdown automaton. A state is an immutable
 * stack (frames linked to their parent), so the token mask (token-mask.ts) branches at every trie
 * node for the cost of one small object, and a rollback restarts from any earlier state.
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

type ObjNode = Extract<GrammarNode, { k: 'obj' }>
type ArrNode = Extract<GrammarNode, { k: 'arr' }>
type LitNode = Extract<GrammarNode, { k: 'lit' }>
type SeqNode = Extract<GrammarNode, { k: 'seq' }>

// OBJ phases: after '{', value pending, after a value, after ',', in a declared key, in a free key, before ':'
const O_OPEN = 0
const O_VAL = 1
const O_AFTER = 2
const O_COMMA = 3
const O_KEY = 4
const O_FKEY = 5
const O_COLON = 6
// ARR phases: after '[', value pending, after a value, after ','
const A_OPEN = 0
const A_VAL = 1
const A_AFTER = 2
const A_NEXT = 3
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

const push = (up: State | null, f: Frame): State => ({ f, up })

export function initialState(root: GrammarNode): State {
  return push(push(null, { t: 'ROOT' }), { t: 'V', n: root })
}

/** Required props at index ≥ i: how many, and the bytes of their keys and shortest values. */
function requiredFrom(n: ObjNode, i: number): { count: number; bytes: number } {
  let count = 0
  let bytes = 0
  for (let j = i; j < n.props.length; j++) {
    const p = n.props[j]
    if (!p.required) continue
    count++
    bytes += p.key.length + minLength(p.node)
  }
  return { count, bytes }
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

const minCache = new WeakMap<GrammarNode, number>()
/** Bytes of the shortest JSON text the node accepts. */
export function minLength(n: GrammarNode): number {
  const hit = minCache.get(n)
  if (hit !== undefined) return hit
  let v: number
  switch (n.k) {
    case 'any':
    case 'num':
      v = 1
      break
    case 'obj': {
      const r = requiredFrom(n, 0)
      v = 2 + r.bytes + Math.max(0, r.count - 1)
      break
    }
    case 'arr':
      v = 2 + n.min * minLength(n.items) + Math.max(0, n.min - 1)
      break
    case 'str':
      v = 2 + n.min
      break
    case 'lit':
      v = Math.min(...n.options.map((o, j) => o.length + (n.next ? minLength(n.next[j]) : 0)))
      break
    case 'alt':
      v = Math.min(...n.options.map(minLength))
      break
    case 'seq':
      v = n.parts.reduce((a, p) => a + minLength(p), 0)
      break
  }
  minCache.set(n, v)
  return v
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

/** Bytes still needed, at the least, before the text is a whole value (0: it is one). */
export function minRemaining(s: State): number {
  let total = 0
  for (let x: State | null = s; x; x = x.up) total += frameRemaining(x.f)
  return total
}

function frameRemaining(f: Frame): number {
  switch (f.t) {
    case 'ROOT':
    case 'END':
      return 0
    case 'V':
      return minLength(f.n)
    case 'STR':
      return (f.esc === 1 ? 1 : f.esc >= 2 ? 6 - f.esc : 0) + (f.u ?? 0) + Math.max(0, f.min - f.len) + 1
    case 'NUM':
      return f.ph === 1 || f.ph === 2 || f.ph === 4 || f.ph === 7 ? 0 : 1
    case 'LIT': {
      let best = Number.POSITIVE_INFINITY
      for (const j of f.cand) {
        const rest = f.n.options[j].length - f.off + (f.n.next ? minLength(f.n.next[j]) : 0)
        if (rest < best) best = rest
      }
      return best
    }
    case 'SEQ': {
      let t = 0
      for (let i = f.i + 1; i < f.n.parts.length; i++) t += minLength(f.n.parts[i])
      return t
    }
    case 'ARR': {
      const { n } = f
      const item = minLength(n.items)
      const doneItems = f.ph === A_VAL ? f.c + 1 : f.c
      const more = Math.max(0, n.min - doneItems)
      if (f.ph === A_OPEN) return n.min === 0 ? 1 : n.min * item + n.min - 1 + 1
      if (f.ph === A_NEXT) return item + Math.max(0, more - 1) * (item + 1) + 1
      return more * (item + 1) + 1
    }
    case 'OBJ':
      return objectRemaining(f)
  }
}

function objectRemaining(f: Extract<Frame, { t: 'OBJ' }>): number {
  const { n } = f
  const free = n.free ? minLength(n.free) : 0
  if (f.ph === O_FKEY) return 1 + free + 1
  if (f.ph === O_COLON) return 1 + free + 1
  if (f.ph === O_KEY) {
    let best = Number.POSITIVE_INFINITY
    for (const j of f.cand as number[]) {
      const p = n.props[j]
      const r = requiredFrom(n, j + 1)
      const rest = p.key.length - (f.off as number) + minLength(p.node) + r.bytes + r.count + 1
      if (rest < best) best = rest
    }
    return best
  }
  const r = requiredFrom(n, f.i)
  if (f.ph === O_OPEN) return r.count === 0 ? 1 : r.bytes + r.count - 1 + 1
  if (f.ph === O_COMMA) {
    if (r.count > 0) return r.bytes + r.count - 1 + 1
    if (n.free) return 3 + free + 1 // "":v}
    let best = Number.POSITIVE_INFINITY
    for (let j = f.i; j < n.props.length; j++) best = Math.min(best, n.props[j].key.length + minLength(n.props[j].node))
    return best + 1
  }
  return r.bytes + r.count + 1 // after a value, or a value pending
}
