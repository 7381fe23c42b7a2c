import { InvalidArgumentError } from './errors.js'
import { f16Table, f32ToF16 } from './f16.js'
import { dequantizeQuantRow, quantRowBytes } from './quant-blocks.js'
import type { WeightMatrix } from './types.js'

/** GGUF Q8_0: 32 weights per block, one f16 scale then 32 int8 (34 bytes). */
export const Q8_0_BLOCK = 32
export const Q8_0_BLOCK_BYTES = 34

/** Bytes a row of `cols` elements takes in a dtype. */
export function rowBytes(dtype: WeightMatrix['dtype'], cols: number): number {
  switch (dtype) {
    case 'f32':
      return cols * 4
    case 'f16':
      return cols * 2
    case 'q8_0':
      if (cols % Q8_0_BLOCK !== 0) throw new InvalidArgumentError(`q8_0 row length ${cols} is not a multiple of 32`)
      return (cols / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES
    default:
      return quantRowBytes(dtype, cols)
  }
}

/** Decode row `r` of a weight matrix into `out[0..cols)` as f32. */
export function dequantizeRow(w: WeightMatrix, r: number, out: Float32Array): void {
  const cols = w.cols
  const rb = rowBytes(w.dtype, cols)
  const base = w.data.byteOffset + r * rb
  if (w.dtype === 'f32') {
    const src = new Float32Array(w.data.buffer, base, cols)
    out.set(src)
  } else if (w.dtype === 'f16') {
    const table = f16Table()
    const dv = new DataView(w.data.buffer, base, rb)
    for (let c = 0; c < cols; c++) out[c] = table[dv.getUint16(c * 2, true)]
  } else if (w.dtype !== 'q8_0') {
    dequantizeQuantRow(w.dtype, new Uint8Array(w.data.buffer, w.data.byteOffset, rb * w.rows), cols, r, out)
  } else {
    const table = f16Table()
    const bytes = new Int8Array(w.data.buffer, base, rb)
    const dv = new DataView(w.data.buffer, base, rb)
    for (let b = 0; b < cols / Q8_0_BLOCK; b++) {
      const d = table[dv.getUint16(b * Q8_0_BLOCK_BYTES, true)]
      const q = b * Q8_0_BLOCK_BYTES + 2
      for (let i = 0; i < Q8_0_BLOCK; i++) out[b * Q8_0_BLOCK + i] = d * bytes[q + i]
    }
  }
}

/** Encode f32 values [rows, cols] as a weight matrix of `dtype` (ggml's rounding for Q8_0). */
export function quantizeMatrix(values: Float32Array, rows: number, cols: number, dtype: WeightMatrix['dtype']): WeightMatrix {
  if (values.length !== rows * cols) throw new InvalidArgumentError(`expected ${rows * cols} values, got ${values.length}`)
  if (dtype !== 'f32' && dtype !== 'f16' && dtype !== 'q8_0')
    throw new InvalidArgumentError(`quantizeMatrix writes f32, f16 and q8_0, not ${dtype}`)
  const rb = rowBytes(dtype, cols)
  const data = new Uint8Array(rb * rows)
  const dv = new DataView(data.buffer)
  if (dtype === 'f32') {
    new Float32Array(data.buffer).set(values)
  } else if (dtype === 'f16') {
    for (let i = 0; i < values.length; i++) dv.setUint16(i * 2, f32ToF16(values[i]), true)
  } else {
    // ggml quantize_row_q8_0_ref: d = amax/127, q = round(x/d), scale stored as f16.
    for (let r = 0; r < rows; r++) {
      for (let b = 0; b < cols / Q8_0_BLOCK; b++) {
        const src = r * cols + b * Q8_0_BLOCK
        let amax = 0
        for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(values[src + i]))
        const d = Math.fround(amax / 127)
        const id = d !== 0 ? Math.fround(1 / d) : 0
        const off = r * rb + b * Q8_0_BLOCK_BYTES
        dv.setUint16(off, f32ToF16(d), true)
        for (let i = 0; i < Q8_0_BLOCK; i++) dv.setInt8(off + 2 + i, roundHalfAway(Math.fround(values[src + i] * id)))
      }
    }
  }
  return { dtype, rows, cols, data }
}

/** C's roundf: halves go away from zero (Math.round sends -2.5 to -2). */
export function roundHalfAway(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x)
}
