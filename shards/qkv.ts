import type { BlockMatrices, Kernels } from './kernels/kernels.js'
import type { Scratch } from './scratch.js'
import type { ModelConfig } from './types.js'

/**
 * [q k v] rows of T tokens into s.qkv [T, qDim + 2 kvDim] from s.xb. The stacked [Wq; Wk; Wv]
 * is one matmul; llama.cpp's mixtures may store attn_v (Q4_K_M, Q5_K_M) or attn_k and attn_v
 * (llama-quantize gives 8-expert models Q8_0 attn_k / attn_v) in other types than attn_q: then
 * the parts run apart and are joined into qkv's rows.
 */
export function qkvMatmul(kernels: Kernels, c: ModelConfig, w: BlockMatrices, s: Scratch, T: number): void {
  const { qDim, kvDim } = c
  if (!w.wv) {
    kernels.matmul(s.qkv, s.xb, w.wqkv, T)
    return
  }
  const width = qDim + 2 * kvDim
  const first = w.wk ? qDim : qDim + kvDim
  const head = s.qk.subarray(0, T * first)
  kernels.matmul(head, s.xb, w.wqkv, T)
  if (w.wk) kernels.matmul(s.k, s.xb, w.wk, T)
  kernels.matmul(s.v, s.xb, w.wv, T)
  for (let t = 0; t < T; t++) {
    s.qkv.set(head.subarray(t * first, (t + 1) * first), t * width)
    if (w.wk) s.qkv.set(s.k.subarray(t * kvDim, (t + 1) * kvDim), t * width + qDim)
    s.qkv.set(s.v.subarray(t * kvDim, (t + 1) * kvDim), t * width + qDim + kvDim)
  }
}
