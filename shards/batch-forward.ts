/**
 * One forward pass over the steps of several sessions at once (continuous batching on a node,
 * issue #18): every op that treats rows independently (RMSNorm, the four matmuls, SwiGLU, the
 * residual adds) runs once over all rows of all sessions, so a weight is read once per batch
 * instead of once per session; RoPE, the KV write and attention run per session, each at its
 * own positions against its own KV cache. A row's result is the same as when its session runs
 * alone: each matmul output element is one dot product summed in a fixed order whatever the
 * batch (shards/kernels/kernels.ts), and attention sees only the session's own cache rows.
 */
import type { BlockWeights, Scratch } from './block.js'
import { familyBlockForward } from './family-block.js'
import type { Kernels } from './kernels/kernels.js'
import type { KvCache } from './kv-cache.js'
import { applyRopeMagnitude } from './model/rope-config.js'
import { moeForward } from './moe-block.js'
import { qkvMatmul } from './qkv.js'
import type { ModelConfig } from './types.js'

/** One session's rows in a batch: `rows` hidden states at positions startPos .. startPos+rows-1. */
export interface BatchPart {
  readonly rows: number
  readonly startPos: number
  readonly cache: KvCache
}

/**
 * One Llama block in place on x [Σ rows, dim], the parts' rows one after the other (the same
 * ops as shards/block.ts blockForward, op by op, with RoPE and attention per part).
 */
export function batchBlockForward(
  kernels: Kernels,
  config: ModelConfig,
  w: BlockWeights,
  x: Float32Array,
  parts: readonly BatchPart[],
  cacheLayer: number,
  s: Scratch
): void {
  if (config.family) {
    // Gemma 2/3 run their own block per session (the same bits as the session alone).
    let row = 0
    for (const p of parts) {
      const xs = x.subarray(row * config.dim, (row + p.rows) * config.dim)
      familyBlockForward(kernels, config, w, xs, p.rows, p.startPos, p.cache, cacheLayer, s)
      row += p.rows
    }
    return
  }
  const R = parts.reduce((n, p) => n + p.rows, 0)
  s.ensure(R)
  const { dim, qDim, kvDim, hiddenDim, nHeads, nKvHeads, headDim, rmsEps, ropeTheta } = config
  const qkvWidth = qDim + 2 * kvDim
  kernels.rmsnorm(s.xb, x, w.attnNorm, R, rmsEps)
  qkvMatmul(kernels, config, w, s, R)
  if (w.bqkv) for (let t = 0; t < R; t++) for (let i = 0; i < qkvWidth; i++) s.qkv[t * qkvWidth + i] += w.bqkv[i]
  // q, k, v apart: [R, qDim], [R, kvDim], [R, kvDim]
  for (let t = 0; t < R; t++) {
    const at = t * qkvWidth
    s.q.set(s.qkv.subarray(at, at + qDim), t * qDim)
    s.k.set(s.qkv.subarray(at + qDim, at + qDim + kvDim), t * kvDim)
    s.v.set(s.qkv.subarray(at + qDim + kvDim, at + qkvWidth), t * kvDim)
  }
  const q = s.q.subarray(0, R * qDim)
  const k = s.k.subarray(0, R * kvDim)
  if (w.qNorm) kernels.rmsnorm(q, q, w.qNorm, R * nHeads, rmsEps)
  if (w.kNorm) kernels.rmsnorm(k, k, w.kNorm, R * nKvHeads, rmsEps)
  let row = 0
  for (const p of parts) {
    const T = p.rows
    const qp = s.q.subarray(row * qDim, (row + T) * qDim)
    const kp = s.k.subarray(row * kvDim, (row + T) * kvDim)
    const vp = s.v.subarray(row * kvDim, (row + T) * kvDim)
    kernels.rope(qp, T, nHeads, headDim, p.startPos, ropeTheta, s.ropeFreqs)
    kernels.rope(kp, T, nKvHeads, headDim, p.startPos, ropeTheta, s.ropeFreqs)
    applyRopeMagnitude(qp, T, nHeads, config)
    applyRopeMagnitude(kp, T, nKvHeads, config)
    p.cache.write(cacheLayer, p.startPos, T, kp, vp)
    const out = s.att.subarray(row * qDim, (row + T) * qDim)
    kernels.attention(out, qp, p.cache.layers[cacheLayer], { T, startPos: p.startPos, nHeads, nKvHeads, headDim })
    row += T
  }
  kernels.matmul(s.xb, s.att, w.wo, R)
  const n = R * dim
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
  // feed-forward: x += W2 (silu(W1 xb) * W3 xb), xb = rmsnorm(x)
  kernels.rmsnorm(s.xb, x, w.ffnNorm, R, rmsEps)
  if (w.moe) {
    // Rows of every session in the batch that chose the same expert share its matmul.
    moeForward(kernels, config, w.moe, s, R)
    for (let i = 0; i < n; i++) x[i] += s.xb[i]
    return
  }
  kernels.matmul(s.h13, s.xb, w.w13, R)
  for (let t = 0; t < R; t++) {
    s.hb.set(s.h13.subarray(t * 2 * hiddenDim, t * 2 * hiddenDim + hiddenDim), t * hiddenDim)
    s.hb2.set(s.h13.subarray(t * 2 * hiddenDim + hiddenDim, (t + 1) * 2 * hiddenDim), t * hiddenDim)
  }
  kernels.swiglu(s.hb, s.hb2, R * hiddenDim)
  kernels.matmul(s.xb, s.hb, w.w2, R)
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
}
