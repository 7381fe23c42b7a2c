import { UnsupportedSchemaError } from '../errors.js'

export { UnsupportedSchemaError }

/**
 * A JSON schema compiled to the grammar the token mask walks (json-automaton.ts). Output is
 * compact JSON (no whitespace), object properties in the schema's order: what OpenAI's strict
 * structured outputs promise (every property present, in order, no others) and what llama.cpp's
 * json-schema-to-grammar produces for the same schemas.
 */
export type GrammarNode =
  | { readonly k: 'any'; readonly depth: number }
  | { readonly k: 'obj'; readonly props: readonly GrammarProp[]; readonly free?: GrammarNode }
  | { readonly k: 'arr'; readonly items: GrammarNode; readonly min: number; readonly max: number }
  | { readonly k: 'str'; readonly min: number; readonly max: number }
  | { readonly k: 'num'; readonly integer: boolean }
  /** One of these byte strings; with `next`, option i goes on as next[i] (a tagged choice). */
  | { readonly k: 'lit'; readonly options: readonly Uint8Array[]; readonly next?: readonly GrammarNode[] }
  | { readonly k: 'alt'; readonly options: readonly GrammarNode[] }
  | { readonly k: 'seq'; readonly parts: readonly GrammarNode[] }

export interface GrammarProp {
  readonly name: string
  /** `"name":` as bytes (the key with its quotes and the colon). */
  readonly key: Uint8Array
  readonly node: GrammarNode
  readonly required: boolean
}

const utf8 = new TextEncoder()
export const bytesOf = (s: string): Uint8Array => utf8.encode(s)
export const literal = (s: string): GrammarNode => ({ k: 'lit', options: [bytesOf(s)] })

/** Longest free string and deepest free nesting: a random model otherwise never closes them. */
export const MAX_ANY_DEPTH = 6

/** Keywords that only annotate (they constrain nothing the grammar must enforce). */
const ANNOTATIONS = new Set([
  'title',
  'description',
  '$schema',
  '$id',
  'examples',
  'default',
  '$comment',
  'type',
  'additionalProperties',
  'strict',
  'format'
])

/** Any JSON value (json_object mode's inside, `{}` schemas). */
export const anyValue = (depth = MAX_ANY_DEPTH): GrammarNode => ({ k: 'any', depth })
/** Any JSON object: `response_format: {type: "json_object"}`. */
export const anyObject = (depth = MAX_ANY_DEPTH): GrammarNode => ({ k: 'obj', props: [], free: anyValue(depth - 1) })

type Schema = Record<string, unknown>

/** Compile a JSON schema (the subset OpenAI's strict mode accepts, plus optional properties). */
export function compileSchema(schema: unknown, path = '$', defs?: Schema): GrammarNode {
  if (schema === true || (typeof schema === 'object' && schema !== null && Object.keys(schema).length === 0)) return anyValue()
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    throw new UnsupportedSchemaError(`${path}: a schema must be an object`)
  const s = schema as Schema
  const root = defs ?? ((s.$defs ?? s.definitions ?? {}) as Schema)
  if (typeof s.$ref === 'string') {
    const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(s.$ref)
    const target = m ? root[m[2]] : undefined
    if (!target) throw new UnsupportedSchemaError(`${path}: $ref ${s.$ref} does not name a local definition`)
    if (path.split('.').length > 32) throw new UnsupportedSchemaError(`${path}: recursive $ref deeper than 32`)
    return compileSchema(target, path, root)
  }
  if (s.const !== undefined) return { k: 'lit', options: [bytesOf(JSON.stringify(s.const))] }
  if (Array.isArray(s.enum)) {
    if (s.enum.length === 0) throw new UnsupportedSchemaError(`${path}: an empty enum matches nothing`)
    return { k: 'lit', options: s.enum.map((v) => bytesOf(JSON.stringify(v))) }
  }
  const alts = (s.anyOf ?? s.oneOf) as unknown
  if (Array.isArray(alts)) return { k: 'alt', options: alts.map((a, i) => compileSchema(a, `${path}.anyOf[${i}]`, root)) }
  for (const key of Object.keys(s)) {
    if (!ANNOTATIONS.has(key) && !KNOWN.has(key) && key !== '$defs' && key !== 'definitions')
      throw new UnsupportedSchemaError(`${path}: keyword '${key}' is not supported by constrained sampling`)
  }
  if (Array.isArray(s.type)) return { k: 'alt', options: s.type.map((t) => compileSchema({ ...s, type: t }, path, root)) }
  switch (s.type) {
    case 'object':
      return compileObject(s, path, root)
    case 'array': {
      const min = count(s.minItems, 0, path)
      const max = count(s.maxItems, Number.POSITIVE_INFINITY, path)
      return { k: 'arr', items: s.items === undefined ? anyValue() : compileSchema(s.items, `${path}[]`, root), min, max }
    }
    case 'string':
      if (s.pattern !== undefined) throw new UnsupportedSchemaError(`${path}: 'pattern' is not supported`)
      return { k: 'str', min: count(s.minLength, 0, path), max: count(s.maxLength, Number.POSITIVE_INFINITY, path) }
    case 'number':
    case 'integer':
      if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'].some((k) => s[k] !== undefined))
        throw new UnsupportedSchemaError(`${path}: numeric bounds are not supported`)
      return { k: 'num', integer: s.type === 'integer' }
    case 'boolean':
      return { k: 'lit', options: [bytesOf('true'), bytesOf('false')] }
    case 'null':
      return literal('null')
    case undefined:
      if (s.properties !== undefined) return compileObject(s, path, root)
      return anyValue()
    default:
      throw new UnsupportedSchemaError(`${path}: unknown type ${JSON.stringify(s.type)}`)
  }
}

const KNOWN = new Set([
  'properties',
  'required',
  'items',
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf'
])

function count(v: unknown, fallback: number, path: string): number {
  if (v === undefined) return fallback
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    throw new UnsupportedSchemaError(`${path}: lengths and item counts must be integers ≥ 0`)
  return v
}

function compileObject(s: Schema, path: string, root: Schema): GrammarNode {
  const props = (s.properties ?? {}) as Schema
  const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : [])
  for (const r of required) if (!(r in props)) throw new UnsupportedSchemaError(`${path}: required property '${r}' has no schema`)
  const compiled: GrammarProp[] = Object.entries(props).map(([name, sub]) => ({
    name,
    key: bytesOf(`${JSON.stringify(name)}:`),
    node: compileSchema(sub, `${path}.${name}`, root),
    required: required.has(name)
  }))
  const extra = s.additionalProperties
  // Free keys only where nothing is declared: with properties, strict mode's additionalProperties
  // false is what a schema means in practice (OpenAI requires it).
  if (compiled.length === 0 && extra !== false)
    return {
      k: 'obj',
      props: [],
      free: typeof extra === 'object' && extra !== null ? compileSchema(extra, path, root) : anyValue(MAX_ANY_DEPTH - 1)
    }
  return { k: 'obj', props: compiled }
}
