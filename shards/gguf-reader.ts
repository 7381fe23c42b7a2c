import {
  BadMagicError,
  InvalidModelError,
  TruncatedFileError,
  UnsupportedModelError,
  UnsupportedTensorTypeError
} from './errors.js'
import type { RangedFile } from './file-reader.js'
import type { GgufValue } from './model-file.js'
import { QUANT_LAYOUTS, type QuantDType } from './quant-blocks.js'
import type { WeightMatrix } from './types.js'

/**
 * GGUF v2/v3 header reader, per ggml's docs/gguf.md: magic "GGUF", u32 version, u64 tensor count,
 * u64 metadata count, metadata key/values, tensor infos, then tensor data aligned to
 * `general.alignment` (default 32). Only the header is read here; tensor data is read on demand.
 */
export interface GgufTensorInfo {
  readonly name: string
  /** GGUF order: ne[0] is the innermost (column) dimension. */
  readonly ne: readonly number[]
  readonly dtype: WeightMatrix['dtype']
  /** Absolute offset of the data in the file. */
  readonly offset: number
  readonly sizeBytes: number
}

export interface GgufHeader {
  readonly version: number
  readonly metadata: Map<string, GgufValue>
  readonly tensors: Map<string, GgufTensorInfo>
  readonly dataOffset: number
}

const GGML_TYPES: Record<number, WeightMatrix['dtype']> = {
  0: 'f32',
  1: 'f16',
  8: 'q8_0',
  ...Object.fromEntries(Object.entries(QUANT_LAYOUTS).map(([dtype, l]) => [l.ggmlType, dtype as QuantDType]))
}
const GGML_TYPE_NAMES: Record<number, string> = {
  2: 'Q4_0',
  3: 'Q4_1',
  6: 'Q5_0',
  7: 'Q5_1',
  9: 'Q8_1',
  10: 'Q2_K',
  11: 'Q3_K',
  12: 'Q4_K',
  13: 'Q5_K',
  14: 'Q6_K',
  15: 'Q8_K',
  16: 'IQ2_XXS',
  17: 'IQ2_XS',
  18: 'IQ3_XXS',
  19: 'IQ1_S',
  20: 'IQ4_NL',
  21: 'IQ3_S',
  22: 'IQ2_S',
  23: 'IQ4_XS',
  24: 'I8',
  25: 'I16',
  26: 'I32',
  27: 'I64',
  28: 'F64',
  29: 'IQ1_M',
  30: 'BF16',
  34: 'TQ1_0',
  35: 'TQ2_0'
}
const MAX_STRING_BYTES = 1 << 24
const MAX_ARRAY_ITEMS = 1 << 26

/** Reads forward through the header, fetching more of the file in chunks as it goes. */
class Cursor {
  private buf: Uint8Array = new Uint8Array(0)
  private view = new DataView(this.buf.buffer)
  private start = 0
  pos = 0
  private readonly decoder = new TextDecoder('utf-8', { fatal: false })

  constructor(private readonly file: RangedFile) {}

  private need(n: number, what: string): number {
    const rel = this.pos - this.start
    if (rel + n <= this.buf.length) return rel
    if (this.pos + n > this.file.sizeBytes) {
      throw new TruncatedFileError(`${this.file.path}: file ends inside the GGUF header (${what} at byte ${this.pos})`)
    }
    const length = Math.min(Math.max(n, 1 << 16), this.file.sizeBytes - this.pos)
    this.buf = this.file.read(this.pos, length, 'GGUF header')
    this.view = new DataView(this.buf.buffer)
    this.start = this.pos
    return 0
  }

  u8(): number {
    const o = this.need(1, 'u8')
    this.pos += 1
    return this.view.getUint8(o)
  }
  i8(): number {
    const o = this.need(1, 'i8')
    this.pos += 1
    return this.view.getInt8(o)
  }
  u16(): number {
    const o = this.need(2, 'u16')
    this.pos += 2
    return this.view.getUint16(o, true)
  }
  i16(): number {
    const o = this.need(2, 'i16')
    this.pos += 2
    return this.view.getInt16(o, true)
  }
  u32(): number {
    const o = this.need(4, 'u32')
    this.pos += 4
    return this.view.getUint32(o, true)
  }
  i32(): number {
    const o = this.need(4, 'i32')
    this.pos += 4
    return this.view.getInt32(o, true)
  }
  f32(): number {
    const o = this.need(4, 'f32')
    this.pos += 4
    return this.view.getFloat32(o, true)
  }
  f64(): number {
    const o = this.need(8, 'f64')
    this.pos += 8
    return this.view.getFloat64(o, true)
  }
  u64(): bigint {
    const o = this.need(8, 'u64')
    this.pos += 8
    return this.view.getBigUint64(o, true)
  }
  i64(): bigint {
    const o = this.need(8, 'i64')
    this.pos += 8
    return this.view.getBigInt64(o, true)
  }
  /** A u64 that must fit in a JS number (counts, sizes, offsets). */
  size(what: string, max: number): number {
    const v = this.u64()
    if (v > BigInt(max)) throw new InvalidModelError(`${this.file.path}: ${what} ${v} exceeds the limit ${max}`)
    return Number(v)
  }
  string(): string {
    const n = this.size('string length', MAX_STRING_BYTES)
    const o = this.need(n, 'string')
    this.pos += n
    return this.decoder.decode(this.buf.subarray(o, o + n))
  }
}

function readValue(c: Cursor, type: number, path: string): GgufValue {
  switch (type) {
    case 0:
      return c.u8()
    case 1:
      return c.i8()
    case 2:
      return c.u16()
    case 3:
      return c.i16()
    case 4:
      return c.u32()
    case 5:
      return c.i32()
    case 6:
      return c.f32()
    case 7:
      return c.u8() !== 0
    case 8:
      return c.string()
    case 9: {
      const itemType = c.u32()
      const n = c.size('array length', MAX_ARRAY_ITEMS)
      const out: GgufValue[] = new Array(n)
      for (let i = 0; i < n; i++) out[i] = readValue(c, itemType, path)
      return out
    }
    case 10:
      return c.u64()
    case 11:
      return c.i64()
    case 12:
      return c.f64()
    default:
      throw new InvalidModelError(`${path}: unknown GGUF metadata value type ${type}`)
  }
}

function tensorBytes(dtype: WeightMatrix['dtype'], elements: number, ne0: number, name: string, path: string): number {
  if (dtype === 'f32') return elements * 4
  if (dtype === 'f16') return elements * 2
  if (dtype === 'q8_0') {
    if (ne0 % 32 !== 0) throw new InvalidModelError(`${path}: Q8_0 tensor ${name} has a row of ${ne0}, not a multiple of 32`)
    return (elements / 32) * 34
  }
  const { blockElems, blockBytes } = QUANT_LAYOUTS[dtype]
  if (ne0 % blockElems !== 0)
    throw new InvalidModelError(`${path}: ${dtype} tensor ${name} has a row of ${ne0}, not a multiple of ${blockElems}`)
  return (elements / blockElems) * blockBytes
}

/** Parse the header of a GGUF file. Throws BadMagicError, TruncatedFileError, UnsupportedTensorTypeError. */
export function readGgufHeader(file: RangedFile): GgufHeader {
  const path = file.path
  const c = new Cursor(file)
  if (file.sizeBytes < 4) throw new TruncatedFileError(`${path}: ${file.sizeBytes} bytes is too short for a GGUF file`)
  const magic = c.u32()
  if (magic !== 0x46554747) {
    throw new BadMagicError(`${path}: not a GGUF file (magic 0x${magic.toString(16).padStart(8, '0')}, expected "GGUF")`)
  }
  const version = c.u32()
  if (version !== 2 && version !== 3)
    throw new UnsupportedModelError(`${path}: GGUF version ${version} is not supported (2 or 3)`)
  const nTensors = c.size('tensor count', 1 << 20)
  const nKv = c.size('metadata count', 1 << 20)
  const metadata = new Map<string, GgufValue>()
  for (let i = 0; i < nKv; i++) {
    const key = c.string()
    metadata.set(key, readValue(c, c.u32(), path))
  }
  const alignmentValue = metadata.get('general.alignment')
  const alignment = typeof alignmentValue === 'number' && alignmentValue > 0 ? alignmentValue : 32
  const infos: Array<{ name: string; ne: number[]; type: number; rel: number }> = []
  for (let i = 0; i < nTensors; i++) {
    const name = c.string()
    const nDims = c.u32()
    if (nDims < 1 || nDims > 4) throw new InvalidModelError(`${path}: tensor ${name} has ${nDims} dimensions`)
    const ne: number[] = []
    for (let d = 0; d < nDims; d++) ne.push(c.size(`dimension of ${name}`, 2 ** 40))
    const type = c.u32()
    const rel = c.size(`offset of ${name}`, Number.MAX_SAFE_INTEGER)
    infos.push({ name, ne, type, rel })
  }
  const dataOffset = Math.ceil(c.pos / alignment) * alignment
  const tensors = new Map<string, GgufTensorInfo>()
  for (const { name, ne, type, rel } of infos) {
    const dtype = GGML_TYPES[type]
    if (dtype === undefined) {
      const typeName = GGML_TYPE_NAMES[type] ?? `type ${type}`
      const supported = Object.values(GGML_TYPES)
        .map((t) => t.toUpperCase())
        .join(', ')
      throw new UnsupportedTensorTypeError(`${path}: tensor ${name} is ${typeName}; supported types are ${supported}`)
    }
    const elements = ne.reduce((a, b) => a * b, 1)
    const sizeBytes = tensorBytes(dtype, elements, ne[0], name, path)
    const offset = dataOffset + rel
    if (offset + sizeBytes > file.sizeBytes) {
      throw new TruncatedFileError(
        `${path}: tensor ${name} ends at byte ${offset + sizeBytes} but the file has ${file.sizeBytes}`
      )
    }
    tensors.set(name, { name, ne, dtype, offset, sizeBytes })
  }
  return { version, metadata, tensors, dataOffset }
}
