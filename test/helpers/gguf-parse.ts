import type { GgufValue } from '../../shards/model/model-file.js'

/** An independent GGUF parser (gguf.md): tests read files with it, not with the engine's reader they check. */
export function parseGguf(file: Uint8Array) {
  const dv = new DataView(file.buffer, file.byteOffset, file.byteLength)
  let p = 0
  const at = (n: number) => (p += n) - n
  const u32 = () => dv.getUint32(at(4), true)
  const u64 = () => dv.getBigUint64(at(8), true)
  const str = () => {
    const n = Number(u64())
    return new TextDecoder().decode(file.subarray(at(n), p))
  }
  const scalar = (t: number): unknown => {
    switch (t) {
      case 0:
        return dv.getUint8(at(1))
      case 1:
        return dv.getInt8(at(1))
      case 2:
        return dv.getUint16(at(2), true)
      case 3:
        return dv.getInt16(at(2), true)
      case 4:
        return u32()
      case 5:
        return dv.getInt32(at(4), true)
      case 6:
        return dv.getFloat32(at(4), true)
      case 7:
        return dv.getUint8(at(1))
      case 8:
        return str()
      case 9: {
        const itemType = u32()
        const n = Number(u64())
        return { itemType, items: Array.from({ length: n }, () => scalar(itemType)) }
      }
      case 10:
        return u64()
      case 11:
        return dv.getBigInt64(at(8), true)
      case 12:
        return dv.getFloat64(at(8), true)
    }
    throw new Error(`bad type ${t}`)
  }
  const magic = new TextDecoder().decode(file.subarray(0, 4))
  p = 4
  const version = u32()
  const nTensors = Number(u64())
  const nKv = Number(u64())
  const kv = new Map<string, { type: number; value: unknown }>()
  for (let i = 0; i < nKv; i++) {
    const key = str()
    const type = u32()
    kv.set(key, { type, value: scalar(type) })
  }
  const tensors = Array.from({ length: nTensors }, () => {
    const name = str()
    const nDims = u32()
    const ne = Array.from({ length: nDims }, () => Number(u64()))
    return { name, ne, type: u32(), offset: Number(u64()) }
  })
  const alignment = (kv.get('general.alignment')?.value as number | undefined) ?? 32
  const dataStart = Math.ceil(p / alignment) * alignment
  return { magic, version, kv, tensors, alignment, headerEnd: p, dataStart }
}

/** The metadata of a GGUF file as the engine's reader gives it: bools as booleans, arrays as arrays. */
export function ggufMetadata(file: Uint8Array): Map<string, GgufValue> {
  const plain = (type: number, v: unknown): GgufValue => {
    if (type === 7) return v !== 0
    if (type === 9) {
      const { itemType, items } = v as { itemType: number; items: unknown[] }
      return items.map((x) => plain(itemType, x)) as GgufValue
    }
    return v as GgufValue
  }
  return new Map([...parseGguf(file).kv].map(([key, { type, value }]) => [key, plain(type, value)]))
}
