import {
  A_NEXT,
  A_OPEN,
  A_VAL,
  type Frame,
  O_COLON,
  O_COMMA,
  O_FKEY,
  O_KEY,
  O_OPEN,
  type ObjNode,
  type State
} from './automaton-state.js'
import type { GrammarNode } from './json-schema.js'

/**
 * The fewest bytes that close a JSON value (issue 37): the shortest text a grammar node accepts
 * (`minLength`), and the bytes still due before an automaton state is a whole value
 * (`minRemaining`). The token mask uses them to keep only tokens after which the value can still
 * close within the token budget.
 */

/** Required props at index ≥ i: how many, and the bytes of their keys and shortest values. */
export function requiredFrom(n: ObjNode, i: number): { count: number; bytes: number } {
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
