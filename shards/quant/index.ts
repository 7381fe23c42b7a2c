import { InvalidArgumentError } from '../errors.js'
import { f16Table, f32ToF16 } from '../f16.js'
import type { WeightDType, WeightMatrix } from '../types.js'
import { dequantQ2_K, dequantQ3_K, dequantQ4_K, dequantQ5_K, dequantQ6_K } from './dequant-k.js'
import { dequantQ4_0, dequantQ4_1, dequantQ5_0, dequantQ5_1, dequantQ8_0 } from './dequant-legacy.js'
import { ggmlTypeOf } from './ggml-types.js'
import { quantQ2_K, quantQ3_K, quantQ4_K, quantQ5_K, quantQ6_K } from './quantize-k.js'
import { quantQ4_0, quantQ4_1, quantQ5_0, quantQ5_1, quantQ8_0 } from './quantize-legacy.js'

/**
 * Reference (slow, readable) block codecs for every GGUF tensor type the engine reads.
 * Decoding follows ggml's dequantize_row_* in float32 arithmetic, so a decoded weight is the
 * value llama.cpp's reference path sees; fast kernels are checked against these.
 *
 *   rowBytes(dtype, cols)                       bytes of one row (cols a multiple of the block)
 *   dequantizeBlocks(dtype, src, at, n, out, o) n elements from byte `at` into out[o..o+n)
 *   dequantizeRow(w, r, out)                    row r of a WeightMatrix into out[0..cols)
 *   quantizeRow(dtype, src, s, n, dst, at)      encode src[s..s+n) at byte `at` of dst
 *   quantizeMatrix(values, rows, cols, dtype)   a new WeightMatrix
 */
export { GGML_TYPE_TABLE, type GgmlType, ggmlTypeById, ggmlTypeName, ggmlTypeOf, supportedTypeNames } from './ggml-types.js'

type BlockDecoder = (src: Uint8Array, at: number, out: Float32Array, o: number) => void
type BlockEncoder = (src: Float32Array, s: number, dst: Uint8Array, at: number) => void

const DECODERS: Partial<Record<WeightDType, BlockDecoder>> = {
  q4_0: dequantQ4_0,
  q4_1: dequantQ4_1,
  q5_0: dequantQ5_0,
  q5_1: dequantQ5_1,
  q8_0: dequantQ8_0,
  q2_k: dequantQ2_K,
  q3_k: dequantQ3_K,
  q4_k: dequantQ4_K,
  q5_k: dequantQ5_K,
  q6_k: dequantQ6_K
}

const ENCODERS: Partial<Record<WeightDType, BlockEncoder>> = {
  q4_0: quantQ4_0,
  q4_1: quantQ4_1,
  q5_0: quantQ5_0,
  q5_1: quantQ5_1,
  q8_0: quantQ8_0,
  q2_k: quantQ2_K,
  q3_k: quantQ3_K,
  q4_k: quantQ4_K,
  q5_k: quantQ5_K,
  q6_k: quantQ6_K
}

/** Bytes of a row of `cols` elements; throws InvalidArgumentError when cols is not whole blocks. */
export function rowBytes(dtype: WeightDType, cols: number): number {
  const t = ggmlTypeOf(dtype)
  if (!Number.isInteger(cols) || cols < 0 || cols % t.blockElems !== 0)
    throw new InvalidArgumentError(`${dtype} row length ${cols} is not a multiple of ${t.blockElems}`)
  return (cols / t.blockElems) * t.blockBytes
}

const f32Bits = new Float32Array(1)
const u32Bits = new Uint32Array(f32Bits.buffer)

/** BF16 is the top half of an f32: decoding shifts it back. */
function bf16ToF32(h: number): number {
  u32Bits[0] = h << 16
  return f32Bits[0]
}

/** ggml_compute_fp32_to_bf16: round to nearest even on the dropped 16 bits; NaN stays quiet NaN. */
export function f32ToBf16(v: number): number {
  f32Bits[0] = v
  const u = u32Bits[0]
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 64) & 0xffff
  return ((u + (0x7fff + ((u >>> 16) & 1))) >>> 16) & 0xffff
}

/** Decode `n` elements (whole blocks) starting at byte `at` of `src` into out[o .. o+n). */
export function dequantizeBlocks(dtype: WeightDType, src: Uint8Array, at: number, n: number, out: Float32Array, o: number): void {
  const bytes = rowBytes(dtype, n)
  if (at < 0 || at + bytes > src.length) throw new InvalidArgumentError(`${bytes} bytes at ${at} run past ${src.length}`)
  if (o < 0 || o + n > out.length) throw new InvalidArgumentError(`${n} values at ${o} run past ${out.length}`)
  if (dtype === 'f32') {
    const dv = new DataView(src.buffer, src.byteOffset + at, bytes)
    for (let i = 0; i < n; i++) out[o + i] = dv.getFloat32(4 * i, true)
    return
  }
  if (dtype === 'f16' || dtype === 'bf16') {
    const table = f16Table()
    for (let i = 0; i < n; i++) {
      const h = src[at + 2 * i] | (src[at + 2 * i + 1] << 8)
      out[o + i] = dtype === 'f16' ? table[h] : bf16ToF32(h)
    }
    return
  }
  const decode = DECODERS[dtype]
  if (!decode) throw new InvalidArgumentError(`no decoder for ${dtype}`)
  const { blockElems, blockBytes } = ggmlTypeOf(dtype)
  for (let b = 0; b < n / blockElems; b++) decode(src, at + b * blockBytes, out, o + b * blockElems)
}

/** Decode row `r` of a weight matrix into out[0..cols) as f32. */
export function dequantizeRow(w: WeightMatrix, r: number, out: Float32Array): void {
  if (!Number.isInteger(r) || r < 0 || r >= w.rows) throw new InvalidArgumentError(`row ${r} of ${w.rows}`)
  const rb = rowBytes(w.dtype, w.cols)
  if (w.dtype === 'f32' && (w.data.byteOffset + r * rb) % 4 === 0) {
    out.set(new Float32Array(w.data.buffer, w.data.byteOffset + r * rb, w.cols))
    return
  }
  dequantizeBlocks(w.dtype, w.data, r * rb, w.cols, out, 0)
}

/** Encode src[s .. s+n) (whole blocks) at byte `at` of `dst`. */
export function quantizeRow(dtype: WeightDType, src: Float32Array, s: number, n: number, dst: Uint8Array, at: number): void {
  const bytes = rowBytes(dtype, n)
  if (s < 0 || s + n > src.length) throw new InvalidArgumentError(`${n} values at ${s} run past ${src.length}`)
  if (at < 0 || at + bytes > dst.length) throw new InvalidArgumentError(`${bytes} bytes at ${at} run past ${dst.length}`)
  if (dtype === 'f32') {
    const dv = new DataView(dst.buffer, dst.byteOffset + at, bytes)
    for (let i = 0; i < n; i++) dv.setFloat32(4 * i, src[s + i], true)
    return
  }
  if (dtype === 'f16' || dtype === 'bf16') {
    for (let i = 0; i < n; i++) {
      const h = dtype === 'f16' ? f32ToF16(src[s + i]) : f32ToBf16(src[s + i])
      dst[at + 2 * i] = h & 0xff
      dst[at + 2 * i + 1] = h >> 8
    }
    return
  }
  const encode = ENCODERS[dtype]
  if (!encode) throw new InvalidArgumentError(`no encoder for ${dtype}`)
  const { blockElems, blockBytes } = ggmlTypeOf(dtype)
  for (let b = 0; b < n / blockElems; b++) encode(src, s + b * blockElems, dst, at + b * blockBytes)
}

/** Encode f32 values [rows, cols] as a weight matrix of `dtype`. */
export function quantizeMatrix(values: Float32Array, rows: number, cols: number, dtype: WeightDType): WeightMatrix {
  if (values.length !== rows * cols) throw new InvalidArgumentError(`expected ${rows * cols} values, got ${values.length}`)
  const rb = rowBytes(dtype, cols)
  const data = new Uint8Array(rb * rows)
  for (let r = 0; r < rows; r++) quantizeRow(dtype, values, r * cols, cols, data, r * rb)
  return { dtype, rows, cols, data }
}
