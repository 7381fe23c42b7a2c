import { InvalidArgumentError } from '../errors.js'
import type { GgufValue } from '../model/model-file.js'

/**
 * Typed GGUF metadata values and the little-endian byte sink the writer builds a header in, per
 * ggml's docs/gguf.md (gguf_metadata_value_type, gguf_string_t). shards/formats/gguf-writer.ts writes files
 * with them.
 */

/** Scalar GGUF metadata types, named after gguf.md's GGUF_METADATA_VALUE_TYPE_*. */
export type GgufScalarType = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'bool' | 'string' | 'u64' | 'i64' | 'f64'

type ScalarOf<T extends GgufScalarType> = T extends 'bool'
  ? boolean
  : T extends 'string'
    ? string
    : T extends 'u64' | 'i64'
      ? number | bigint
      : number

/** A metadata value with its explicit GGUF type (a JS number alone does not say u32 or f32). */
export type GgufTypedValue =
  | { [T in GgufScalarType]: { type: T; value: ScalarOf<T> } }[GgufScalarType]
  | { [T in GgufScalarType]: { type: 'array'; itemType: T; value: ReadonlyArray<ScalarOf<T>> } }[GgufScalarType]

/** gguf.md GGUF_METADATA_VALUE_TYPE_* numbers. */
export const VALUE_TYPE: Record<GgufScalarType | 'array', number> = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12
}
const INT_RANGE: Partial<Record<GgufScalarType, readonly [number, number]>> = {
  u8: [0, 0xff],
  i8: [-0x80, 0x7f],
  u16: [0, 0xffff],
  i16: [-0x8000, 0x7fff],
  u32: [0, 0xffffffff],
  i32: [-0x80000000, 0x7fffffff]
}
export const encoder = new TextEncoder()

/** Little-endian byte sink for the header, grown by doubling (reserve first: it may swap the buffer). */
export class ByteWriter {
  private buf = new Uint8Array(1 << 16)
  private view = new DataView(this.buf.buffer)
  length = 0

  private reserve(n: number): number {
    if (this.length + n > this.buf.length) {
      const next = new Uint8Array(Math.max(this.buf.length * 2, this.length + n))
      next.set(this.buf.subarray(0, this.length))
      this.buf = next
      this.view = new DataView(next.buffer)
    }
    const at = this.length
    this.length += n
    return at
  }

  u8(v: number): void {
    const o = this.reserve(1)
    this.view.setUint8(o, v)
  }
  i8(v: number): void {
    const o = this.reserve(1)
    this.view.setInt8(o, v)
  }
  u16(v: number): void {
    const o = this.reserve(2)
    this.view.setUint16(o, v, true)
  }
  i16(v: number): void {
    const o = this.reserve(2)
    this.view.setInt16(o, v, true)
  }
  u32(v: number): void {
    const o = this.reserve(4)
    this.view.setUint32(o, v, true)
  }
  i32(v: number): void {
    const o = this.reserve(4)
    this.view.setInt32(o, v, true)
  }
  f32(v: number): void {
    const o = this.reserve(4)
    this.view.setFloat32(o, v, true)
  }
  f64(v: number): void {
    const o = this.reserve(8)
    this.view.setFloat64(o, v, true)
  }
  u64(v: bigint): void {
    const o = this.reserve(8)
    this.view.setBigUint64(o, v, true)
  }
  i64(v: bigint): void {
    const o = this.reserve(8)
    this.view.setBigInt64(o, v, true)
  }
  /** gguf_string_t: u64 byte length, then UTF-8 without a terminator. */
  string(s: string): void {
    const bytes = encoder.encode(s)
    this.u64(BigInt(bytes.length))
    const at = this.reserve(bytes.length)
    this.buf.set(bytes, at)
  }
  padTo(alignment: number): void {
    this.reserve((alignment - (this.length % alignment)) % alignment) // new bytes are zero
  }
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length)
  }
}

export function checkScalar(type: GgufScalarType, value: unknown, key: string): void {
  let ok: boolean
  if (type === 'bool') ok = typeof value === 'boolean'
  else if (type === 'string') ok = typeof value === 'string'
  else if (type === 'f32' || type === 'f64') ok = typeof value === 'number'
  else if (type === 'u64' || type === 'i64') {
    ok = typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value))
    if (ok) {
      const v = BigInt(value as number | bigint)
      ok = type === 'u64' ? v >= 0n && v < 1n << 64n : v >= -(1n << 63n) && v < 1n << 63n
    }
  } else {
    const range = INT_RANGE[type]
    if (range === undefined) throw new InvalidArgumentError(`metadata ${key}: unknown GGUF type ${String(type)}`)
    ok = typeof value === 'number' && Number.isInteger(value) && value >= range[0] && value <= range[1]
  }
  if (!ok) throw new InvalidArgumentError(`metadata ${key}: ${String(value)} is not a valid GGUF ${type}`)
}

const SCALAR_WRITERS: { [T in GgufScalarType]: (w: ByteWriter, v: ScalarOf<T>) => void } = {
  u8: (w, v) => w.u8(v),
  i8: (w, v) => w.i8(v),
  u16: (w, v) => w.u16(v),
  i16: (w, v) => w.i16(v),
  u32: (w, v) => w.u32(v),
  i32: (w, v) => w.i32(v),
  f32: (w, v) => w.f32(v),
  f64: (w, v) => w.f64(v),
  bool: (w, v) => w.u8(v ? 1 : 0), // gguf.md: a bool is one byte, 0 or 1
  string: (w, v) => w.string(v),
  u64: (w, v) => w.u64(BigInt(v)),
  i64: (w, v) => w.i64(BigInt(v))
}

export function writeScalar(w: ByteWriter, type: GgufScalarType, value: unknown): void {
  ;(SCALAR_WRITERS[type] as (w: ByteWriter, v: unknown) => void)(w, value)
}

/** The value a GGUF reader returns for a typed value: f32 rounded to f32, 64-bit ints as bigint. */
export function ggufPlainValue(v: GgufTypedValue): GgufValue {
  const plain = (type: GgufScalarType, x: number | bigint | boolean | string): GgufValue => {
    if (type === 'f32') return Math.fround(x as number)
    if (type === 'u64' || type === 'i64') return BigInt(x as number | bigint)
    return x
  }
  if (v.type === 'array') return v.value.map((x) => plain(v.itemType, x))
  return plain(v.type, v.value)
}
