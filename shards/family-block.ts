import { InvalidModelError } from './errors.js'
import { f16Table, f32ToF16 } from './f16.js'
import type { AttentionShape, BlockMatrices, Kernels, KvLayer } from './kernels/kernels.js'
import type { KvCache } from './kv-cache.js'
import { isSlidingLayer } from './model/family-config.js'
import { applyRopeMagnitude, ropeFrequencies } from './model/rope-config.js'
import { qkvMatmul } from './qkv.js'
import type { Scratch } from './scratch.js'
import type { FamilyParams, ModelConfig } from './types.js'

/*
 * The Gemma 2 / Gemma 3 block, op by op, in llama.cpp's order (src/models/gemma2.cpp,
 * gemma3.cpp graph):
 *   xb = RMSNorm(x)·attn_norm;  q, k, v = xb·W;  (gemma3) per-head RMSNorm of q and k;
 *   RoPE (the layer's base: local or global);  q ×= f_attention_scale;
 *   attention with kq scale 1, scores soft-capped (gemma2: cap·tanh(s/cap)), sliding-window
 *   mask on the local layers;  x += RMSNorm(att·Woᵀ)·post_attention_norm;
 *   x += RMSNorm(W2 (gelu(W1 xb) ⊙ W3 xb))·post_ffw_norm, with xb = RMSNorm(x)·ffn_norm.
 * The matmuls, norms and RoPE run on the kernel set; attention (with its soft-cap and window)
 * and GeGLU run here, in float32 steps as ggml's CPU ops do. The fused native block does not
 * take these families (fused-block.ts refuses a config with `family`).
 */

/** RoPE frequency tables of a config: the global one and the sliding layers' one. */
const ropeTables = new WeakMap<ModelConfig, { global: Float64Array; local: Float64Array }>()

function ropeFor(c: ModelConfig, sliding: boolean): Float64Array {
  let t = ropeTables.get(c)
  if (!t) {
    const f = c.family as FamilyParams
    t = {
      global: ropeFrequencies(c),
      local: ropeFrequencies({
        headDim: c.headDim,
        ropeTheta: f.ropeThetaSwa,
        ropeFreqScale: f.ropeFreqScaleSwa,
        ropeFreqFactors: null
      })
    }
    ropeTables.set(c, t)
  }
  return sliding ? t.local : t.global
}

export function familyBlockForward(
  kernels: Kernels,
  c: ModelConfig,
  w: BlockMatrices,
  x: Float32Array,
  T: number,
  startPos: number,
  cache: KvCache,
  cacheLayer: number,
  s: Scratch
): void {
  const f = c.family as FamilyParams
  if (w.layer === undefined || (f.postNorms && (!w.attnPostNorm || !w.ffnPostNorm)))
    throw new InvalidModelError(`a ${c.architecture} block needs its layer index and post-norm weights`)
  s.ensure(T)
  const { dim, qDim, kvDim, hiddenDim, nHeads, nKvHeads, headDim, rmsEps, ropeTheta } = c
  const sliding = isSlidingLayer(c, w.layer)
  kernels.rmsnorm(s.xb, x, w.attnNorm, T, rmsEps)
  const width = qDim + 2 * kvDim
  qkvMatmul(kernels, c, w, s, T)
  for (let t = 0; t < T; t++) {
    const at = t * width
    s.q.set(s.qkv.subarray(at, at + qDim), t * qDim)
    s.k.set(s.qkv.subarray(at + qDim, at + qDim + kvDim), t * kvDim)
    s.v.set(s.qkv.subarray(at + qDim + kvDim, at + width), t * kvDim)
  }
  const q = s.q.subarray(0, T * qDim)
  const k = s.k.subarray(0, T * kvDim)
  const v = s.v.subarray(0, T * kvDim)
  if (w.qNorm) kernels.rmsnorm(q, q, w.qNorm, T * nHeads, rmsEps)
  if (w.kNorm) kernels.rmsnorm(k, k, w.kNorm, T * nKvHeads, rmsEps)
  const freqs = ropeFor(c, sliding)
  kernels.rope(q, T, nHeads, headDim, startPos, ropeTheta, freqs)
  kernels.rope(k, T, nKvHeads, headDim, startPos, ropeTheta, freqs)
  applyRopeMagnitude(q, T, nHeads, c)
  applyRopeMagnitude(k, T, nKvHeads, c)
  // ggml_scale(Qcur, f_attention_scale): one float32 product per element.
  for (let i = 0; i < q.length; i++) q[i] = Math.fround(q[i] * f.attnScale)
  cache.write(cacheLayer, startPos, T, k, v)
  familyAttention(
    s.att,
    q,
    cache.layers[cacheLayer],
    { T, startPos, nHeads, nKvHeads, headDim },
    {
      window: sliding ? f.slidingWindow : 0,
      softcap: f.attnSoftcap
    }
  )
  kernels.matmul(s.xb, s.att, w.wo, T)
  if (w.attnPostNorm) kernels.rmsnorm(s.xb, s.xb, w.attnPostNorm, T, rmsEps)
  const n = T * dim
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
  kernels.rmsnorm(s.xb, x, w.ffnNorm, T, rmsEps)
  kernels.matmul(s.h13, s.xb, w.w13, T)
  for (let t = 0; t < T; t++) {
    s.hb.set(s.h13.subarray(t * 2 * hiddenDim, t * 2 * hiddenDim + hiddenDim), t * hiddenDim)
    s.hb2.set(s.h13.subarray(t * 2 * hiddenDim + hiddenDim, (t + 1) * 2 * hiddenDim), t * hiddenDim)
  }
  if (f.ffnAct === 'gelu') geglu(s.hb, s.hb2, T * hiddenDim)
  else kernels.swiglu(s.hb, s.hb2, T * hiddenDim)
  kernels.matmul(s.xb, s.hb, w.w2, T)
  if (w.ffnPostNorm) kernels.rmsnorm(s.xb, s.xb, w.ffnPostNorm, T, rmsEps)
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
}

let geluTable: Float32Array | undefined

/**
 * ggml's GELU table (ggml-cpu.c: ggml_table_gelu_f16[i] = fp16(ggml_gelu_f32(fp32(i)))), with
 * ggml_gelu_f32 = 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))) in float32 steps.
 */
function geluF16Table(): Float32Array {
  if (geluTable) return geluTable
  const f16 = f16Table()
  const t = new Float32Array(65536)
  const fr = Math.fround
  const a = fr(0.044715)
  const s2pi = fr(0.7978845608028654)
  for (let h = 0; h < 65536; h++) {
    const xv = f16[h]
    const inner = fr(fr(s2pi * xv) * fr(1 + fr(fr(a * xv) * xv)))
    t[h] = f16[f32ToF16(fr(fr(0.5 * xv) * fr(1 + fr(Math.tanh(inner)))))]
  }
  geluTable = t
  return t
}

/** gate[i] = gelu(gate[i]) · up[i], as ggml_vec_geglu_f32 (GGML_GELU_FP16: the gate through the f16 table). */
export function geglu(gate: Float32Array, up: Float32Array, n: number): void {
  const t = geluF16Table()
  for (let i = 0; i < n; i++) {
    const g = gate[i]
    if (g <= -10) gate[i] = 0
    else if (g >= 10) gate[i] = Math.fround(g * up[i])
    else gate[i] = Math.fround(t[f32ToF16(g)] * up[i])
  }
}

/** cap·tanh(v / cap) in float32 steps (ggml_scale, ggml_tanh, ggml_scale), in place; cap 0 leaves v. */
export function softcap(v: Float32Array, cap: number, n = v.length): void {
  if (!(cap > 0)) return
  const inv = Math.fround(1 / cap)
  for (let i = 0; i < n; i++) v[i] = Math.fround(Math.fround(Math.tanh(Math.fround(v[i] * inv))) * cap)
}

/** Element i of a KV array as f32 (Q8_0: d·q of its block), as kernels-ref.ts reads it. */
function kvReader(dtype: KvLayer['dtype'], a: Float32Array | Uint16Array | Uint8Array): (i: number) => number {
  const table = f16Table()
  if (dtype === 'f32') return (i) => a[i]
  if (dtype === 'f16') return (i) => table[a[i]]
  return (i) => {
    const at = (i >> 5) * 34
    return Math.fround(table[a[at] | (a[at + 1] << 8)] * ((a[at + 2 + (i & 31)] << 24) >> 24))
  }
}

/**
 * Causal attention with kq scale 1 (the queries are pre-scaled), optional soft-capping of the
 * scores and a sliding window: row t (position p = startPos + t) sees keys at p0 ≤ p with
 * p − p0 < window (llama_hparams::is_masked_swa, LLAMA_SWA_TYPE_STANDARD). Sums in float64,
 * scores and weights rounded to float32, as the reference attention (kernels-ref.ts).
 */
export function familyAttention(
  out: Float32Array,
  q: Float32Array,
  kv: KvLayer,
  shape: AttentionShape,
  o: { window: number; softcap: number }
): void {
  const { T, startPos, nHeads, nKvHeads, headDim } = shape
  const kvDim = nKvHeads * headDim
  const width = nHeads * headDim
  const kvMul = nHeads / nKvHeads
  const kAt = kvReader(kv.dtype, kv.keys)
  const vAt = kvReader(kv.dtype, kv.values)
  const att = new Float64Array(startPos + T)
  const fr = Math.fround
  const inv = o.softcap > 0 ? fr(1 / o.softcap) : 0
  for (let t = 0; t < T; t++) {
    const pos = startPos + t
    const from = o.window > 0 ? Math.max(0, pos - o.window + 1) : 0
    for (let h = 0; h < nHeads; h++) {
      const qo = t * width + h * headDim
      const ko = Math.floor(h / kvMul) * headDim
      let max = Number.NEGATIVE_INFINITY
      for (let p = from; p <= pos; p++) {
        let s = 0
        for (let i = 0; i < headDim; i++) s += q[qo + i] * kAt(p * kvDim + ko + i)
        s = fr(s)
        if (o.softcap > 0) s = fr(fr(Math.tanh(fr(s * inv))) * o.softcap)
        att[p] = s
        if (s > max) max = s
      }
      let sum = 0
      for (let p = from; p <= pos; p++) {
        att[p] = fr(Math.exp(att[p] - max))
        sum += att[p]
      }
      for (let p = from; p <= pos; p++) att[p] = fr(att[p] / sum)
      for (let i = 0; i < headDim; i++) {
        let acc = 0
        for (let p = from; p <= pos; p++) acc += att[p] * vAt(p * kvDim + ko + i)
        out[qo + i] = acc
      }
    }
  }
}
