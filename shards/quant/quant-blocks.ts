import { InvalidArgumentError } from '../errors.js'
import { f16Table } from '../f16.js'
import { GGML_TYPE_TABLE } from './ggml-types.js'

/**
 * GGUF block types beyond F32/F16/Q8_0 that the fast kernels multiply. Their ggml type id,
 * block size and activation quantisation come from the one type table,
 * shards/quant/ggml-types.ts GGML_TYPE_TABLE. Layouts: ggml-common.h block_q4_0 … block_q6_K.
 */
export const QUANT_DTYPES = ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'bf16'] as const
export type QuantDType = (typeof QUANT_DTYPES)[number]

export interface QuantLayout {
  /** ggml_type id (ggml.h), also the type code the native addon takes. */
  readonly ggmlType: number
  /** Elements per block. */
  readonly blockElems: number
  readonly blockBytes: number
  /** Activation quantisation of the dot product. */
  readonly activations: 'q8_0' | 'q8_k' | 'f32'
}

export const QUANT_LAYOUTS: Readonly<Record<QuantDType, QuantLayout>> = Object.fromEntries(
  QUANT_DTYPES.map((dtype) => {
    const t = GGML_TYPE_TABLE.find((g) => g.dtype === dtype) as (typeof GGML_TYPE_TABLE)[number]
    return [dtype, { ggmlType: t.id, blockElems: t.blockElems, blockBytes: t.blockBytes, activations: t.activations }]
  })
) as Record<QuantDType, QuantLayout>

export function isQuantDType(dtype: string): dtype is QuantDType {
  return Object.hasOwn(QUANT_LAYOUTS, dtype)
}

/** Bytes of a row of `cols` elements; throws when cols is not a whole number of blocks. */
export function quantRowBytes(dtype: QuantDType, cols: number): number {
  const l = QUANT_LAYOUTS[dtype]
  if (!Number.isInteger(cols) || cols <= 0 || cols % l.blockElems !== 0)
    throw new InvalidArgumentError(`${dtype} row length ${cols} is not a multiple of ${l.blockElems}`)
  return (cols / l.blockElems) * l.blockBytes
}

/**
 * Integer quants and scales of one block as the dot products use them: `q[i]` is the
 * element's integer (offsets like Q4_0's −8 applied), `scale[s]`/`min[s]` the integer scale and
 * min of sub-block s (K-quants) and `d`/`dmin` the block's float scales, so that
 * element i = d·scale[s]·q[i] − dmin·min[s] (K-quants, s = i / subLen) or d·q[i] + m (legacy).
 */
export interface UnpackedBlock {
  readonly q: Int32Array
  readonly scale: Int32Array
  readonly min: Int32Array
  d: number
  dmin: number
  subLen: number
}

export function createUnpackedBlock(): UnpackedBlock {
  return { q: new Int32Array(256), scale: new Int32Array(16), min: new Int32Array(16), d: 0, dmin: 0, subLen: 32 }
}

/** get_scale_min_k4 of ggml-quants.c: 6-bit scale and min j of a Q4_K/Q5_K block's 12 bytes. */
function scaleMinK4(j: number, s: Uint8Array, at: number): [number, number] {
  if (j < 4) return [s[at + j] & 63, s[at + j + 4] & 63]
  return [(s[at + j + 4] & 0xf) | ((s[at + j - 4] >> 6) << 4), (s[at + j + 4] >> 4) | ((s[at + j] >> 6) << 4)]
}

/**
 * Unpack block `b` of a row starting at byte `at` of `bytes` (any dtype but bf16). Written from
 * ggml-common.h's structs and ggml-quants.c's dequantize_row_* (what each bit means, not code).
 */
export function unpackBlock(dtype: QuantDType, bytes: Uint8Array, at: number, out: UnpackedBlock): void {
  const h = f16Table()
  const half = (o: number) => h[bytes[o] | (bytes[o + 1] << 8)]
  const { q, scale, min } = out
  switch (dtype) {
    case 'q4_0':
    case 'q4_1':
    case 'q5_0':
    case 'q5_1': {
      const withMin = dtype === 'q4_1' || dtype === 'q5_1'
      const five = dtype === 'q5_0' || dtype === 'q5_1'
      out.d = half(at)
      out.dmin = withMin ? half(at + 2) : 0
      let o = at + (withMin ? 4 : 2)
      const qh = five ? (bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24)) >>> 0 : 0
      if (five) o += 4
      const offset = withMin ? 0 : five ? 16 : 8
      for (let j = 0; j < 16; j++) {
        const lo = bytes[o + j] & 0xf
        const hi = bytes[o + j] >> 4
        q[j] = (five ? lo | (((qh >>> j) & 1) << 4) : lo) - offset
        q[j + 16] = (five ? hi | (((qh >>> (j + 16)) & 1) << 4) : hi) - offset
      }
      out.subLen = 32
      return
    }
    case 'q4_k':
    case 'q5_k': {
      out.d = half(at)
      out.dmin = half(at + 2)
      const five = dtype === 'q5_k'
      const qh = at + 16
      const qs = five ? at + 48 : at + 16
      for (let j = 0; j < 8; j++) [scale[j], min[j]] = scaleMinK4(j, bytes, at + 4)
      for (let k = 0; k < 4; k++) {
        for (let l = 0; l < 32; l++) {
          const v = bytes[qs + 32 * k + l]
          const h0 = five ? ((bytes[qh + l] >> (2 * k)) & 1) << 4 : 0
          const h1 = five ? ((bytes[qh + l] >> (2 * k + 1)) & 1) << 4 : 0
          q[64 * k + l] = (v & 0xf) | h0
          q[64 * k + 32 + l] = (v >> 4) | h1
        }
      }
      out.subLen = 32
      return
    }
    case 'q6_k': {
      const ql = at
      const qh = at + 128
      out.d = half(at + 208)
      out.dmin = 0
      for (let s = 0; s < 16; s++) scale[s] = (bytes[at + 192 + s] << 24) >> 24
      for (let n = 0; n < 2; n++) {
        for (let l = 0; l < 32; l++) {
          const a = bytes[ql + 64 * n + l]
          const c = bytes[ql + 64 * n + l + 32]
          const hb = bytes[qh + 32 * n + l]
          q[128 * n + l] = ((a & 0xf) | ((hb & 3) << 4)) - 32
          q[128 * n + l + 32] = ((c & 0xf) | (((hb >> 2) & 3) << 4)) - 32
          q[128 * n + l + 64] = ((a >> 4) | (((hb >> 4) & 3) << 4)) - 32
          q[128 * n + l + 96] = ((c >> 4) | (((hb >> 6) & 3) << 4)) - 32
        }
      }
      out.subLen = 16
      return
    }
    case 'q3_k': {
      const hm = at
      const qs = at + 32
      const sc = at + 96
      out.d = half(at + 108)
      out.dmin = 0
      // 16 6-bit scales: low 4 bits from bytes 0..7 (low nibbles then high nibbles), high 2
      // bits from bytes 8..11 (ggml's kmask1/kmask2 shuffle, element by element).
      for (let s = 0; s < 16; s++) {
        const lo = s < 8 ? bytes[sc + s] & 0xf : bytes[sc + s - 8] >> 4
        const hi = (bytes[sc + 8 + (s & 3)] >> (2 * (s >> 2))) & 3
        scale[s] = (lo | (hi << 4)) - 32
      }
      for (let n = 0; n < 2; n++) {
        for (let j = 0; j < 4; j++) {
          for (let l = 0; l < 32; l++) {
            const low = (bytes[qs + 32 * n + l] >> (2 * j)) & 3
            const high = (bytes[hm + l] >> (4 * n + j)) & 1
            q[128 * n + 32 * j + l] = low - (high ? 0 : 4)
          }
        }
      }
      out.subLen = 16
      return
    }
    case 'q2_k': {
      const qs = at + 16
      out.d = half(at + 80)
      out.dmin = half(at + 82)
      for (let s = 0; s < 16; s++) {
        scale[s] = bytes[at + s] & 0xf
        min[s] = bytes[at + s] >> 4
      }
      for (let n = 0; n < 2; n++)
        for (let j = 0; j < 4; j++) for (let l = 0; l < 32; l++) q[128 * n + 32 * j + l] = (bytes[qs + 32 * n + l] >> (2 * j)) & 3
      out.subLen = 16
      return
    }
    case 'bf16':
      throw new InvalidArgumentError('bf16 has no blocks to unpack')
  }
}

/** Decode row `r` of a matrix of a QuantDType into `out[0..cols)` (float64 math, stored as f32). */
export function dequantizeQuantRow(dtype: QuantDType, data: Uint8Array, cols: number, r: number, out: Float32Array): void {
  const rb = quantRowBytes(dtype, cols)
  const at = r * rb
  if (dtype === 'bf16') {
    const u32 = new Uint32Array(1)
    const f32 = new Float32Array(u32.buffer)
    for (let c = 0; c < cols; c++) {
      u32[0] = (data[at + 2 * c] | (data[at + 2 * c + 1] << 8)) << 16
      out[c] = f32[0]
    }
    return
  }
  const { blockElems, blockBytes } = QUANT_LAYOUTS[dtype]
  const u = createUnpackedBlock()
  const kQuant = blockElems === 256
  for (let b = 0; b < cols / blockElems; b++) {
    unpackBlock(dtype, data, at + b * blockBytes, u)
    for (let i = 0; i < blockElems; i++) {
      const s = Math.floor(i / u.subLen)
      out[b * blockElems + i] = kQuant ? u.d * u.scale[s] * u.q[i] - u.dmin * u.min[s] : u.d * u.q[i] + u.dmin
    }
  }
}
