import { InvalidArgumentError } from '../errors.js'
import { f16Table, f32ToF16 } from '../f16.js'
import { dequantizeRow, Q8_0_BLOCK, Q8_0_BLOCK_BYTES, roundHalfAway, rowBytes } from '../quant/codecs.js'
import type { WeightMatrix } from '../types.js'
import { matmulQuantExact } from './kernels-ref-exact-quant.js'

/**
 * Slow TypeScript definitions of exactly what the fast matmul kernels compute (shards/asm/,
 * shards/native/), float32 step by step with Math.fround. The fast kernels are tested to match
 * these bit for bit; the float64 reference in kernels-ref.ts is the tolerance check.
 *
 * f32/f16 weights: 4 lane accumulators over k in steps of 4, then (l0 + l1) + (l2 + l3), then
 * the k % 4 tail added in order.
 * Q8_0 weights: activations quantized per 32-block as ggml quantize_row_q8_0 (d = amax/127
 * stored as f16, q = roundf(x / d)), exact integer block sums, then
 * sumf = sumf + isum * (dw * dx) in block order (ggml_vec_dot_q8_0_q8_0, generic C path).
 */
const fr = Math.fround

/** Activations quantized to Q8_0 blocks: q[T, cols] int8 values and f16-rounded scales d[T, cols/32]. */
export interface QuantizedActivations {
  readonly q: Int8Array
  readonly d: Float32Array
}

export function quantizeActivationsQ8(x: Float32Array, cols: number, T: number): QuantizedActivations {
  if (cols % Q8_0_BLOCK !== 0) throw new InvalidArgumentError(`q8_0 row length ${cols} is not a multiple of 32`)
  const nb = cols / Q8_0_BLOCK
  const q = new Int8Array(T * cols)
  const d = new Float32Array(T * nb)
  const table = f16Table()
  for (let t = 0; t < T; t++) {
    for (let b = 0; b < nb; b++) {
      const o = t * cols + b * Q8_0_BLOCK
      let amax = 0
      for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(x[o + i]))
      const dd = fr(amax / 127)
      const id = dd !== 0 ? fr(1 / dd) : 0
      d[t * nb + b] = table[f32ToF16(dd)]
      for (let i = 0; i < Q8_0_BLOCK; i++) q[o + i] = roundHalfAway(fr(x[o + i] * id))
    }
  }
  return { q, d }
}

/** out[T, rows] = x[T, cols] · wᵀ with the fast kernels' exact arithmetic. */
export function matmulExact(out: Float32Array, x: Float32Array, w: WeightMatrix, T: number): void {
  const { rows, cols } = w
  if (w.dtype === 'q8_0') {
    matmulQ8Exact(out, x, w, T)
    return
  }
  if (w.dtype !== 'f32' && w.dtype !== 'f16') {
    matmulQuantExact(out, x, w.dtype, w.data, rows, cols, T)
    return
  }
  f32OrderRows(out, x, rows, cols, T, (r, row) => dequantizeRow(w, r, row))
}

/**
 * The f32 order of every weight the kernels widen exactly to f32 (f32, f16, BF16): per (row,
 * token), 4 lane accumulators over k in steps of 4, (l0 + l1) + (l2 + l3), then the tail.
 * `decode(r, row)` writes row r's weights as f32.
 */
export function f32OrderRows(
  out: Float32Array,
  x: Float32Array,
  rows: number,
  cols: number,
  T: number,
  decode: (r: number, row: Float32Array) => void
): void {
  const row = new Float32Array(cols)
  const n4 = cols & ~3
  for (let r = 0; r < rows; r++) {
    decode(r, row)
    for (let t = 0; t < T; t++) {
      const xo = t * cols
      let a0 = 0
      let a1 = 0
      let a2 = 0
      let a3 = 0
      for (let k = 0; k < n4; k += 4) {
        a0 = fr(a0 + fr(row[k] * x[xo + k]))
        a1 = fr(a1 + fr(row[k + 1] * x[xo + k + 1]))
        a2 = fr(a2 + fr(row[k + 2] * x[xo + k + 2]))
        a3 = fr(a3 + fr(row[k + 3] * x[xo + k + 3]))
      }
      let s = fr(fr(a0 + a1) + fr(a2 + a3))
      for (let k = n4; k < cols; k++) s = fr(s + fr(row[k] * x[xo + k]))
      out[t * rows + r] = s
    }
  }
}

function matmulQ8Exact(out: Float32Array, x: Float32Array, w: WeightMatrix, T: number): void {
  const { rows, cols } = w
  const nb = cols / Q8_0_BLOCK
  const rb = rowBytes('q8_0', cols)
  const { q, d } = quantizeActivationsQ8(x, cols, T)
  const bytes = new Int8Array(w.data.buffer, w.data.byteOffset, rb * rows)
  const dv = new DataView(w.data.buffer, w.data.byteOffset, rb * rows)
  const table = f16Table()
  for (let r = 0; r < rows; r++) {
    for (let t = 0; t < T; t++) {
      let sumf = 0
      for (let b = 0; b < nb; b++) {
        const wo = r * rb + b * Q8_0_BLOCK_BYTES
        const dw = table[dv.getUint16(wo, true)]
        const xo = t * cols + b * Q8_0_BLOCK
        let isum = 0
        for (let i = 0; i < Q8_0_BLOCK; i++) isum += bytes[wo + 2 + i] * q[xo + i]
        sumf = fr(sumf + fr(isum * fr(dw * d[t * nb + b])))
      }
      out[t * rows + r] = sumf
    }
  }
}
