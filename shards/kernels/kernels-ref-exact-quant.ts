import { InvalidArgumentError } from '../errors.js'
import {
  createUnpackedBlock,
  dequantizeQuantRow,
  QUANT_LAYOUTS,
  type QuantDType,
  quantRowBytes,
  unpackBlock
} from '../quant/quant-blocks.js'
import { f32OrderRows, quantizeActivationsQ8 } from './kernels-ref-exact.js'

/**
 * Slow TypeScript definitions of exactly what the fast kernels compute for the block types of
 * quant-blocks.ts (shards/native/quant-dot.cc gives the same bits). Everything inside a block
 * is an exact integer sum, so any evaluation order gives it; only the per-block float steps
 * below are ordered (f32, step by step with Math.fround), in block order per (row, token).
 *
 * Activations, as llama.cpp's CPU dot products:
 * - legacy Q4_0/Q4_1/Q5_0/Q5_1 multiply Q8_0 activations (kernels-ref-exact.ts
 *   quantizeActivationsQ8: 32-blocks, d = amax/127 rounded to f16, q = roundf(x/d));
 * - K-quants multiply Q8_K activations (ggml quantize_row_q8_K_ref: 256-blocks, the signed
 *   value of largest magnitude maps to −127, iscale = −127/max, q = nearest_int(iscale·x)
 *   (ties to even) capped at 127, d = 1/iscale kept as f32, plus Σq per 16);
 * - BF16 weights multiply f32 activations (shards/kernels/kernels-ref-exact.ts matmulExact's f32 path).
 *
 * Per block b, with dx the activation scale:
 * - Q4_0, Q5_0: sumf = sumf + isum · (dw · dx)                          (as Q8_0)
 * - Q4_1, Q5_1: sumf = sumf + (isum · (dw · dx) + m · (dx · Σqx))
 * - Q4_K, Q5_K, Q2_K: sumf = sumf + ((dx · d) · Σ sc·(q·qx) − (dx · dmin) · Σ mn·Σqx)
 * - Q6_K, Q3_K: sumf = sumf + (dx · d) · Σ sc·(q·qx)
 * where every Σ is an exact integer, converted to f32 (rounding) before its product.
 */
const fr = Math.fround

/** Q8_K activations: q[T, cols], d[T, cols/256] (f32), bsums[T, cols/16]. */
export interface Q8KActivations {
  readonly q: Int8Array
  readonly d: Float32Array
  readonly bsums: Int32Array
}

/** ggml nearest_int: round to nearest, ties to even, through the 1.5·2²³ trick (|v| < 2²²). */
function nearestInt(v: number): number {
  return fr(v + 12582912) - 12582912
}

export function quantizeActivationsQ8K(x: Float32Array, cols: number, T: number): Q8KActivations {
  if (cols % 256 !== 0) throw new InvalidArgumentError(`q8_K row length ${cols} is not a multiple of 256`)
  const nb = cols / 256
  const q = new Int8Array(T * cols)
  const d = new Float32Array(T * nb)
  const bsums = new Int32Array(T * (cols / 16))
  for (let t = 0; t < T; t++) {
    for (let b = 0; b < nb; b++) {
      const o = t * cols + b * 256
      let amax = 0
      let max = 0
      for (let j = 0; j < 256; j++) {
        const ax = Math.abs(x[o + j])
        if (ax > amax) {
          amax = ax
          max = x[o + j]
        }
      }
      // amax is 0 (or NaN: no element compares greater) → zero block, as ggml's !amax.
      if (amax === 0) continue
      const iscale = fr(-127 / max)
      for (let j = 0; j < 256; j++) q[o + j] = Math.min(127, nearestInt(fr(iscale * x[o + j])))
      for (let s = 0; s < 16; s++) {
        let sum = 0
        for (let i = 0; i < 16; i++) sum += q[o + 16 * s + i]
        bsums[(o >> 4) + s] = sum
      }
      d[t * nb + b] = fr(1 / iscale)
    }
  }
  return { q, d, bsums }
}

/** out[T, rows] = x[T, cols] · wᵀ for a QuantDType matrix with the fast kernels' arithmetic. */
export function matmulQuantExact(
  out: Float32Array,
  x: Float32Array,
  dtype: QuantDType,
  data: Uint8Array,
  rows: number,
  cols: number,
  T: number
): void {
  const rb = quantRowBytes(dtype, cols)
  if (data.byteLength < rb * rows) throw new InvalidArgumentError(`weight data has ${data.byteLength} bytes, needs ${rb * rows}`)
  const { activations, blockBytes, blockElems } = QUANT_LAYOUTS[dtype]
  if (activations === 'f32') {
    // BF16: weights widened exactly to f32, then the f32 order of kernels-ref-exact.ts.
    f32OrderRows(out, x, rows, cols, T, (r, row) => dequantizeQuantRow(dtype, data, cols, r, row))
    return
  }
  const nb = cols / blockElems
  const u = createUnpackedBlock()
  const acts = activations === 'q8_k' ? quantizeActivationsQ8K(x, cols, T) : null
  const a8 = activations === 'q8_0' ? quantizeActivationsQ8(x, cols, T) : null
  const qx = acts ? acts.q : (a8 as { q: Int8Array }).q
  for (let r = 0; r < rows; r++) {
    for (let t = 0; t < T; t++) {
      let sumf = 0
      for (let b = 0; b < nb; b++) {
        unpackBlock(dtype, data, r * rb + b * blockBytes, u)
        const xo = t * cols + b * blockElems
        if (acts) {
          const dx = acts.d[t * nb + b]
          let sumi = 0
          let summ = 0
          for (let s = 0; s < blockElems / u.subLen; s++) {
            let dot = 0
            let bs = 0
            for (let i = s * u.subLen; i < (s + 1) * u.subLen; i++) {
              dot += u.q[i] * qx[xo + i]
              bs += qx[xo + i]
            }
            sumi += u.scale[s] * dot
            summ += u.min[s] * bs
          }
          const main = fr(fr(dx * fr(u.d)) * fr(sumi))
          if (dtype === 'q6_k' || dtype === 'q3_k') sumf = fr(sumf + main)
          else sumf = fr(sumf + fr(main - fr(fr(dx * fr(u.dmin)) * fr(summ))))
        } else {
          const dx = (a8 as { d: Float32Array }).d[t * nb + b]
          let isum = 0
          let sx = 0
          for (let i = 0; i < 32; i++) {
            isum += u.q[i] * qx[xo + i]
            sx += qx[xo + i]
          }
          const main = fr(isum * fr(u.d * dx))
          if (dtype === 'q4_1' || dtype === 'q5_1') sumf = fr(sumf + fr(main + fr(u.dmin * fr(dx * sx))))
          else sumf = fr(sumf + main)
        }
      }
      out[t * rows + r] = sumf
    }
  }
}
