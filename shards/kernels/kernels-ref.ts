import { f16Table } from '../f16.js'
import { dequantizeRow } from '../quant/codecs.js'
import type { AttentionShape, Kernels, KvLayer } from './kernels.js'

/**
 * Plain TypeScript reference kernels: the slow, readable definition every fast kernel is
 * checked against (llama2.c run.c, one op per function). Sums accumulate in float64 in
 * index order; results are stored as float32.
 *
 * Matmul on every GGUF block type (shards/quant/): each weight row is decoded to the f32
 * values ggml's dequantize_row_* gives, then dotted with the f32 activations in float64.
 * Activations are NOT quantised here (llama.cpp's CPU dot products quantise them to Q8_0 /
 * Q8_K blocks; the fast kernels do, see kernels-ref-exact*.ts). So this is the float64
 * reference on dequantised weights itself: its only error is the final rounding to f32
 * (≤ 2⁻²⁴ relative per output), and the fast kernels' stated tolerances are against it.
 */
export function createReferenceKernels(): Kernels {
  let rowScratch = new Float32Array(0)
  const rowBuffer = (n: number): Float32Array => {
    if (rowScratch.length < n) rowScratch = new Float32Array(n)
    return rowScratch
  }

  return {
    name: 'reference',
    prepare: (w) => w,

    matmul(out, x, w, T) {
      const { rows, cols } = w
      if (w.dtype === 'f32') {
        const wf = new Float32Array(w.data.buffer, w.data.byteOffset, rows * cols)
        for (let t = 0; t < T; t++) {
          const xo = t * cols
          for (let r = 0; r < rows; r++) {
            const wo = r * cols
            let s = 0
            for (let c = 0; c < cols; c++) s += wf[wo + c] * x[xo + c]
            out[t * rows + r] = s
          }
        }
        return
      }
      // Other dtypes: decode one row at a time and use it for every token of the batch.
      const row = rowBuffer(cols)
      for (let r = 0; r < rows; r++) {
        dequantizeRow(w, r, row)
        for (let t = 0; t < T; t++) {
          const xo = t * cols
          let s = 0
          for (let c = 0; c < cols; c++) s += row[c] * x[xo + c]
          out[t * rows + r] = s
        }
      }
    },

    rmsnorm(out, x, weight, T, eps) {
      const n = weight.length
      for (let t = 0; t < T; t++) {
        const o = t * n
        let ss = 0
        for (let i = 0; i < n; i++) ss += x[o + i] * x[o + i]
        const scale = 1 / Math.sqrt(Math.fround(Math.fround(ss / n) + eps))
        for (let i = 0; i < n; i++) out[o + i] = weight[i] * Math.fround(scale * x[o + i])
      }
    },

    rope(x, T, nHeads, headDim, startPos, theta, freqs) {
      const width = nHeads * headDim
      for (let t = 0; t < T; t++) {
        const pos = startPos + t
        for (let i = 0; i < width; i += 2) {
          const hd = i % headDim
          const freq = freqs ? freqs[hd >> 1] : 1 / theta ** (hd / headDim)
          const val = pos * freq
          const fcr = Math.cos(val)
          const fci = Math.sin(val)
          const o = t * width + i
          const v0 = x[o]
          const v1 = x[o + 1]
          x[o] = v0 * fcr - v1 * fci
          x[o + 1] = v0 * fci + v1 * fcr
        }
      }
    },

    attention(out, q, kv, shape) {
      attentionReference(out, q, kv, shape)
    },

    swiglu(gate, up, n) {
      for (let i = 0; i < n; i++) {
        const g = gate[i]
        gate[i] = (g / (1 + Math.exp(-g))) * up[i]
      }
    }
  }
}

/** Element i of a KV array as f32 (Q8_0: d·q of its block, the float32 product ggml computes). */
function kvReader(dtype: KvLayer['dtype'], a: Float32Array | Uint16Array | Uint8Array): (i: number) => number {
  const table = f16Table()
  if (dtype === 'f32') return (i) => a[i]
  if (dtype === 'f16') return (i) => table[a[i]]
  return (i) => {
    const at = (i >> 5) * 34
    return Math.fround(table[a[at] | (a[at + 1] << 8)] * ((a[at + 2 + (i & 31)] << 24) >> 24))
  }
}

function attentionReference(out: Float32Array, q: Float32Array, kv: KvLayer, shape: AttentionShape): void {
  const { T, startPos, nHeads, nKvHeads, headDim } = shape
  const kvDim = nKvHeads * headDim
  const width = nHeads * headDim
  const kvMul = nHeads / nKvHeads
  const scale = 1 / Math.sqrt(headDim)
  const kAt = kvReader(kv.dtype, kv.keys)
  const vAt = kvReader(kv.dtype, kv.values)
  const att = new Float64Array(startPos + T)
  for (let t = 0; t < T; t++) {
    const len = startPos + t + 1 // causal: row t sees positions 0 .. startPos+t
    for (let h = 0; h < nHeads; h++) {
      const qo = t * width + h * headDim
      const ko = Math.floor(h / kvMul) * headDim
      let max = Number.NEGATIVE_INFINITY
      for (let p = 0; p < len; p++) {
        let s = 0
        for (let i = 0; i < headDim; i++) s += q[qo + i] * kAt(p * kvDim + ko + i)
        s = Math.fround(s * scale)
        att[p] = s
        if (s > max) max = s
      }
      let sum = 0
      for (let p = 0; p < len; p++) {
        att[p] = Math.fround(Math.exp(att[p] - max))
        sum += att[p]
      }
      for (let p = 0; p < len; p++) att[p] = Math.fround(att[p] / sum)
      for (let i = 0; i < headDim; i++) {
        let s = 0
        for (let p = 0; p < len; p++) s += att[p] * vAt(p * kvDim + ko + i)
        out[qo + i] = s
      }
    }
  }
}
