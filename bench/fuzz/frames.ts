/**
 * A seeded mutation fuzzer over layerswarm.proto (issue #17): messages are generated from the
 * schema by reflection (every field, oneof member and enum, values at and past their limits,
 * repeated fields up to floods), encoded by protobufjs, and then, half of the time, mutated as
 * bytes: huge varints, truncations, wrong wire types, flipped and inserted bytes, duplicated runs.
 * The same seed gives the same frames, so a failure can be replayed.
 */
import type protobuf from 'protobufjs'
import { REPEATED_LIMITS } from '../../protocol/wire-scan.js'

/** mulberry32: a small, fast, seedable PRNG (not for secrets). */
export function createRng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface FrameContext {
  readonly rng: () => number
  /** Strings worth using for ids (the fuzzer's own session, the node's model id, peer ids). */
  readonly strings: readonly string[]
  /** Activation width, so some tensors are well-formed. */
  readonly dim: number
}

const pick = <T>(rng: () => number, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]
const int = (rng: () => number, n: number): number => Math.floor(rng() * n)

function randomBytes(rng: () => number, n: number): Uint8Array {
  const out = new Uint8Array(n)
  for (let i = 0; i < n; i++) out[i] = int(rng, 256)
  return out
}

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
}

function stringValue(ctx: FrameContext): string {
  const { rng } = ctx
  switch (int(rng, 6)) {
    case 0:
      return ''
    case 1:
      return 'x'.repeat(pick(rng, [127, 128, 129, 256, 257, 600]))
    case 2:
      return 'a b\u0000é\u{1F600}'
    case 3:
      return String.fromCharCode(...randomBytes(rng, 1 + int(rng, 40)))
    default:
      return pick(rng, ctx.strings)
  }
}

function scalarValue(field: protobuf.Field, ctx: FrameContext): unknown {
  const { rng, dim } = ctx
  switch (field.type) {
    case 'string':
      return stringValue(ctx)
    case 'bytes':
      return randomBytes(rng, pick(rng, [0, 1, 31, 32, 33, 60, 61, 64, 65, int(rng, 2048)]))
    case 'bool':
      return rng() < 0.5
    case 'double':
    case 'float':
      return pick(rng, [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, -Number.MAX_VALUE, rng() * 1e6])
    case 'uint64':
      return pick(rng, [0, 1, 2, 3, 7, 2 ** 32, 2 ** 53 - 1, int(rng, 1e9)])
    default:
      // uint32 and enums (enums: any value, declared or not)
      return pick(rng, [0, 1, 2, 3, 4, 5, 8, 16, dim, 64, 512, 513, 2 ** 16, 2 ** 24 + 1, 2 ** 31, 2 ** 32 - 1, int(rng, 100)])
  }
}

/** A well-formed-looking tensor half of the time: [rows, dim] f32 of finite values. */
function tensorValue(ctx: FrameContext): Record<string, unknown> {
  const { rng, dim } = ctx
  const rows = 1 + int(rng, 4)
  const values = new Float32Array(rows * dim)
  for (let i = 0; i < values.length; i++) values[i] = rng() * 2 - 1
  return { shape: [rows, dim], dtype: 0, data: new Uint8Array(values.buffer) }
}

/** A wire object of `type` with random fields; repeated fields sometimes past their limit. */
export function generate(type: protobuf.Type, ctx: FrameContext, depth = 0, only?: string): Record<string, unknown> {
  const { rng } = ctx
  if (type.name === 'Tensor' && rng() < 0.5) return tensorValue(ctx)
  const obj: Record<string, unknown> = {}
  const chosen = new Set<string>()
  for (const oneof of type.oneofsArray) {
    const member = only ?? (rng() < 0.95 ? pick(rng, oneof.oneof) : undefined)
    if (member !== undefined) chosen.add(member)
  }
  for (const field of type.fieldsArray) {
    if (field.partOf != null && !chosen.has(field.name)) continue
    if (field.partOf == null && rng() < 0.15) continue
    const message =
      field.resolvedType != null && 'fields' in field.resolvedType ? (field.resolvedType as protobuf.Type) : undefined
    const one = (): unknown => (message ? (depth < 4 ? generate(message, ctx, depth + 1) : {}) : scalarValue(field, ctx))
    if (field.repeated) {
      const limit = REPEATED_LIMITS[`${type.name}.${snake(field.name)}`] ?? 16
      const n = pick(rng, [0, 1, 2, limit, limit + 1, int(rng, limit * 3), rng() < 0.05 ? 20_000 : 3])
      // floods of empty entries are what amplified; keep their generation cheap
      const empty = message ? {} : field.type === 'string' ? '' : field.type === 'bytes' ? new Uint8Array(0) : 0
      obj[field.name] = Array.from({ length: n }, (_, i) => (n > 256 && i > 8 ? empty : one()))
    } else obj[field.name] = one()
  }
  return obj
}

/** protobufjs refuses some values (NaN into a uint32...): those frames become random bytes. */
export function encode(type: protobuf.Type, obj: Record<string, unknown>, ctx: FrameContext): Uint8Array {
  try {
    return type.encode(obj).finish()
  } catch {
    return randomBytes(ctx.rng, 1 + int(ctx.rng, 512))
  }
}

export type Mutation = 'none' | 'flip' | 'truncate' | 'insert' | 'huge-varint' | 'wire-type' | 'duplicate' | 'length'

const MUTATIONS: Mutation[] = ['flip', 'truncate', 'insert', 'huge-varint', 'wire-type', 'duplicate', 'length']

/** Applies one byte-level mutation (or none, half of the time). */
export function mutate(bytes: Uint8Array, ctx: FrameContext): { bytes: Uint8Array; mutation: Mutation } {
  const { rng } = ctx
  if (rng() < 0.5 || bytes.length === 0) return { bytes, mutation: 'none' }
  const mutation = pick(rng, MUTATIONS)
  const at = int(rng, bytes.length)
  const splice = (insert: Uint8Array, cut = 0): Uint8Array => {
    const out = new Uint8Array(bytes.length - cut + insert.length)
    out.set(bytes.subarray(0, at))
    out.set(insert, at)
    out.set(bytes.subarray(at + cut), at + insert.length)
    return out
  }
  switch (mutation) {
    case 'flip': {
      const out = bytes.slice()
      for (let i = 0; i < 1 + int(rng, 4); i++) out[int(rng, out.length)] ^= 1 << int(rng, 8)
      return { bytes: out, mutation }
    }
    case 'truncate':
      return { bytes: bytes.subarray(0, at), mutation }
    case 'insert':
      return { bytes: splice(randomBytes(rng, 1 + int(rng, 16))), mutation }
    case 'huge-varint': {
      // a varint of 10 or 11 bytes (the 11th is never valid), or 2^64 - 1
      const long = new Uint8Array(pick(rng, [10, 11])).fill(0xff)
      long[long.length - 1] = 0x01
      return { bytes: splice(long), mutation }
    }
    case 'wire-type': {
      const out = bytes.slice()
      out[at] = (out[at] & ~7) | int(rng, 8)
      return { bytes: out, mutation }
    }
    case 'duplicate': {
      const len = Math.min(bytes.length - at, 1 + int(rng, 8))
      const run = bytes.subarray(at, at + len)
      const times = pick(rng, [2, 16, 1000])
      const rep = new Uint8Array(len * times)
      for (let i = 0; i < times; i++) rep.set(run, i * len)
      return { bytes: splice(rep), mutation }
    }
    case 'length': {
      const out = bytes.slice()
      out[at] = pick(rng, [0x7f, 0xff, 0x00, 0x80])
      return { bytes: out, mutation }
    }
    default:
      return { bytes, mutation: 'none' }
  }
}

/**
 * A request of body `type` that is valid for the fuzzer's own session "fz" (opened with
 * max_length 64) but for values at or just past their limits: what reaches the deep paths
 * (compute, rewind, export, import) instead of stopping at field validation.
 */
export function validRequest(type: string, ctx: FrameContext, modelId: string): Record<string, unknown> {
  const { rng } = ctx
  const sessionId = rng() < 0.8 ? 'fz' : pick(rng, ctx.strings)
  const edge = (max: number): number => pick(rng, [0, 1, max - 1, max, max + 1, int(rng, max)])
  switch (type) {
    case 'open':
      return {
        open: {
          sessionId,
          modelId,
          start: pick(rng, [1, 2]),
          end: pick(rng, [3, 4, 5]),
          maxLength: edge(512),
          wireDtype: int(rng, 3)
        }
      }
    case 'step': {
      const t = tensorValue(ctx)
      return { step: { sessionId, stepId: 1 + int(rng, 1e6), startPosition: edge(64), hidden: t, chain: rng() < 0.1 } }
    }
    case 'rewind':
      return { rewind: { sessionId, length: edge(64) } }
    case 'close':
      return { close: { sessionId: rng() < 0.1 ? sessionId : pick(rng, ctx.strings) } }
    case 'awaitResult':
      return { awaitResult: { sessionId, stepId: 1 + int(rng, 100) } }
    case 'awaitResults':
      return { awaitResults: { sessionId, stepIds: Array.from({ length: int(rng, 12) }, () => 1 + int(rng, 100)) } }
    case 'exportKv': {
      const to = edge(64)
      return {
        exportKv: {
          sessionId,
          from: int(rng, to + 1),
          to,
          sequence: int(rng, 10),
          prefixHash: randomBytes(rng, 32),
          delta: rng() < 0.5
        }
      }
    }
    case 'importKv':
      return {
        importKv: {
          sessionId,
          wrappedKey: randomBytes(rng, pick(rng, [0, 92, 93])),
          snapshots: [randomBytes(rng, 64 + int(rng, 512))],
          snapshotSessionId: sessionId,
          prefixHash: randomBytes(rng, 32),
          append: rng() < 0.5
        }
      }
    default:
      return {}
  }
}
