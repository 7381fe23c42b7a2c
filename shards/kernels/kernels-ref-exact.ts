import { f16Table } from '../f16.js'
import { dequantizeRow, Q8_0_BLOCK, Q8_0_BLOCK_BYTES, rowBytes } from '../quant/codecs.js'
import type { WeightMatrix } from '../types.js'
import { matmulQuantExact } from './kernels-ref-exact-quant.js'
import { f32OrderRows, quantizeActivationsQ8 } from './kernels-ref-exact-rows.js'

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

export { type QuantizedActivations, quantizeActivationsQ8 } from './kernels-ref-exact-rows.js'

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
