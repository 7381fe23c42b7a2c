import {
  BadMagicError,
  InvalidModelError,
  TensorSizeMismatchError,
  TruncatedFileError,
  UnknownTensorTypeError,
  UnsupportedModelError,
  UnsupportedTensorTypeError
} from '../errors.js'
import type { ByteSource, GgufValue } from '../model/model-file.js'
import { type GgmlType, ggmlTypeById, ggmlTypeName, supportedTypeNames } from '../quant/ggml-types.js'
import type { WeightMatrix } from '../types.js'

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

const MAX_STRING_BYTES = 1 << 24
const MAX_ARRAY_ITEMS = 1 << 26

/** Reads forward through the header, fetching more of the file in chunks as it goes. */
class Cursor {
  private buf: Uint8Array = new Uint8Array(0)
  private view = new DataView(this.buf.buffer)
  private start = 0
  pos = 0
  private readonly decoder = new TextDecoder('utf-8', { fatal: false })

  constructor(private readonly file: ByteSource) {}

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

/**
 * Bytes of a tensor of `type` and shape `ne`: ggml_nbytes. A row (ne[0]) must be a whole number
 * of the type's blocks, or the shape cannot be stored in that type at all.
 */
function tensorBytes(type: GgmlType, ne: readonly number[], name: string, path: string): number {
  if (ne[0] % type.blockElems !== 0) {
    throw new TensorSizeMismatchError(
      `${path}: tensor ${name} is ${type.name} with rows of ${ne[0]}, not a multiple of its ${type.blockElems}-element blocks`
    )
  }
  const elements = ne.reduce((a, b) => a * b, 1)
  return (elements / type.blockElems) * type.blockBytes
}

/**
 * Parse the header of a GGUF file. Throws BadMagicError, TruncatedFileError,
 * UnknownTensorTypeError (an id ggml does not define), UnsupportedTensorTypeError (IQ*, …),
 * TensorSizeMismatchError (a shape its type cannot hold, or more bytes than the file gives it).
 */
export function readGgufHeader(file: ByteSource): GgufHeader {
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
  for (const { name, ne, type: id, rel } of infos) {
    const type = ggmlTypeById(id)
    if (type === undefined) {
      const known = ggmlTypeName(id)
      if (known === undefined) throw new UnknownTensorTypeError(`${path}: tensor ${name} has unknown ggml type id ${id}`)
      throw new UnsupportedTensorTypeError(`${path}: tensor ${name} is ${known}; supported types are ${supportedTypeNames()}`)
    }
    const sizeBytes = tensorBytes(type, ne, name, path)
    const offset = dataOffset + rel
    if (rel % alignment !== 0)
      throw new InvalidModelError(`${path}: tensor ${name} at data offset ${rel} is not aligned to ${alignment} bytes`)
    if (offset + sizeBytes > file.sizeBytes) {
      throw new TruncatedFileError(
        `${path}: tensor ${name} ends at byte ${offset + sizeBytes} but the file has ${file.sizeBytes}`
      )
    }
    tensors.set(name, { name, ne, dtype: type.dtype, offset, sizeBytes })
  }
  // Writers lay tensors out back to back, each padded to the alignment (gguf.md; ggml's
  // gguf writer and gguf-py): the bytes up to the next tensor are its size rounded up. More or
  // fewer means its type × shape is not what was stored (or tensors overlap).
  const byOffset = [...tensors.values()].sort((a, b) => a.offset - b.offset)
  for (let i = 0; i + 1 < byOffset.length; i++) {
    const t = byOffset[i]
    const room = byOffset[i + 1].offset - t.offset
    if (t.sizeBytes > room || room >= t.sizeBytes + alignment) {
      throw new TensorSizeMismatchError(
        `${path}: tensor ${t.name} (${t.dtype}, [${t.ne}]) is ${t.sizeBytes} bytes but the file gives it ${room} (next: ${byOffset[i + 1].name})`
      )
    }
  }
  return { version, metadata, tensors, dataOffset }
}
