import type { Kernels } from './kernels.js'
import type { KvCache } from './kv-cache.js'
import type { ModelFile } from './model-file.js'
import type { ModelConfig, WeightMatrix } from './types.js'

/** The weights of one transformer block (llama2.c TransformerWeights, one layer). */
export interface BlockWeights {
  readonly attnNorm: Float32Array // [dim]
  readonly wq: WeightMatrix // [dim, dim]
  readonly wk: WeightMatrix // [kvDim, dim]
  readonly wv: WeightMatrix // [kvDim, dim]
  readonly wo: WeightMatrix // [dim, dim]
  readonly ffnNorm: Float32Array // [dim]
  readonly w1: WeightMatrix // gate [hidden, dim]
  readonly w2: WeightMatrix // down [dim, hidden]
  readonly w3: WeightMatrix // up [hidden, dim]
}

export function loadBlock(model: ModelFile, layer: number, kernels: Kernels): BlockWeights {
  const m = (t: 'attn_q' | 'attn_k' | 'attn_v' | 'attn_output' | 'ffn_gate' | 'ffn_down' | 'ffn_up'): WeightMatrix =>
    kernels.prepare(model.readMatrix(`blk.${layer}.${t}`))
  return {
    attnNorm: model.readVector(`blk.${layer}.attn_norm`),
    wq: m('attn_q'),
    wk: m('attn_k'),
    wv: m('attn_v'),
    wo: m('attn_output'),
    ffnNorm: model.readVector(`blk.${layer}.ffn_norm`),
    w1: m('ffn_gate'),
    w2: m('ffn_down'),
    w3: m('ffn_up')
  }
}

/** Activation buffers for a batch of up to `capacity` tokens, reused across steps. */
export class Scratch {
  capacity = 0
  xb = new Float32Array(0) // [T, dim]
  q = new Float32Array(0) // [T, dim]
  k = new Float32Array(0) // [T, kvDim]
  v = new Float32Array(0) // [T, kvDim]
  att = new Float32Array(0) // [T, dim]
  hb = new Float32Array(0) // [T, hidden]
  hb2 = new Float32Array(0) // [T, hidden]

  constructor(private readonly config: ModelConfig) {}

  ensure(T: number): void {
    if (T <= this.capacity) return
    const { dim, kvDim, hiddenDim } = this.config
    this.capacity = T
    this.xb = new Float32Array(T * dim)
    this.q = new Float32Array(T * dim)
    this.k = new Float32Array(T * kvDim)
    this.v = new Float32Array(T * kvDim)
    this.att = new Float32Array(T * dim)
    this.hb = new Float32Array(T * hiddenDim)
    this.hb2 = new Float32Array(T * hiddenDim)
  }
}

/**
 * One Llama block on a batch of T tokens at positions startPos .. startPos+T-1, in place on
 * x [T, dim] (llama2.c forward(), one layer, with every op batched over T and causal attention).
 */
export function blockForward(
  kernels: Kernels,
  config: ModelConfig,
  w: BlockWeights,
  x: Float32Array,
  T: number,
  startPos: number,
  cache: KvCache,
  cacheLayer: number,
  s: Scratch
): void {
  const { dim, hiddenDim, nHeads, nKvHeads, headDim, rmsEps, ropeTheta } = config
  // attention: xb = rmsnorm(x); q, k, v = xb Wqᵀ, xb Wkᵀ, xb Wvᵀ; RoPE on q and k
  kernels.rmsnorm(s.xb, x, w.attnNorm, T, rmsEps)
  kernels.matmul(s.q, s.xb, w.wq, T)
  kernels.matmul(s.k, s.xb, w.wk, T)
  kernels.matmul(s.v, s.xb, w.wv, T)
  kernels.rope(s.q, T, nHeads, headDim, startPos, ropeTheta)
  kernels.rope(s.k, T, nKvHeads, headDim, startPos, ropeTheta)
  cache.write(cacheLayer, startPos, T, s.k, s.v)
  kernels.attention(s.att, s.q, cache.layers[cacheLayer], { T, startPos, nHeads, nKvHeads, headDim })
  kernels.matmul(s.xb, s.att, w.wo, T)
  const n = T * dim
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
  // feed-forward: x += W2 (silu(W1 xb) * W3 xb), xb = rmsnorm(x)
  kernels.rmsnorm(s.xb, x, w.ffnNorm, T, rmsEps)
  kernels.matmul(s.hb, s.xb, w.w1, T)
  kernels.matmul(s.hb2, s.xb, w.w3, T)
  kernels.swiglu(s.hb, s.hb2, T * hiddenDim)
  kernels.matmul(s.xb, s.hb, w.w2, T)
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
}
