import { InvalidArgumentError } from 'commander'
import { parseSpeculate, type SpeculateMode, wireDtypeFromName } from '../../client/index.js'
import type { DType } from '../../protocol/index.js'
import { BadOptionError } from './errors.js'

/** Commander parser for an integer option ≥ min. */
export function int(name: string, min: number) {
  return (v: string): number => {
    const n = Number(v)
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`)
    return n
  }
}

/** Commander parser for a number option in [min, max]. */
export function float(name: string, min: number, max = Number.POSITIVE_INFINITY) {
  return (v: string): number => {
    const n = Number(v)
    if (!Number.isFinite(n) || n < min || n > max)
      throw new InvalidArgumentError(
        max === Number.POSITIVE_INFINITY ? `${name} must be a number ≥ ${min}` : `${name} must be a number in [${min}, ${max}]`
      )
    return n
  }
}

/** "a:b" → [a, b) inside [0, nLayers). */
export function parseSpan(text: string, nLayers: number): [number, number] {
  const m = /^(\d+):(\d+)$/.exec(text)
  const a = m ? Number(m[1]) : Number.NaN
  const b = m ? Number(m[2]) : Number.NaN
  if (!m || a >= b || b > nLayers)
    throw new BadOptionError(`--layers ${text}: expected a:b with 0 ≤ a < b ≤ ${nLayers} (the model has ${nLayers} blocks)`)
  return [a, b]
}

export const SPECULATE_HELP =
  'speculative steps (docs/speculation.md): drafted tokens checked by every hop in one step, same tokens (lossless): off, ngram (prompt lookup in the context, no model), self (the edge blocks and head draft, skipping the swarm), draft:<file> (a small model with the same tokenizer)'

/** Commander parser for --speculate: off, ngram, self or draft:<file>. */
export function speculateOption(v: string): SpeculateMode {
  try {
    return parseSpeculate(v)
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message)
  }
}

/** `--wire f32,f16,q8_0` → the dtypes a node accepts (int8: a deprecated name of q8_0). */
export function wireDtypeList(text: string): DType[] {
  const out: DType[] = []
  for (const name of text
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const d = wireDtypeFromName(name)
    if (d === undefined) throw new InvalidArgumentError(`--wire ${text}: ${name} is not one of f32, f16, q8_0`)
    if (!out.includes(d)) out.push(d)
  }
  if (out.length === 0) throw new InvalidArgumentError('--wire: list at least one of f32, f16, q8_0')
  return out
}
export { tamperHeadOption } from './head-options.js'
