import { InvalidModelError } from './errors.js'
import { familyBlockForward } from './family-block.js'
import type { BlockMatrices, ExpertFfn, Kernels, MoeMatrices, PrepareOptions } from './kernels/kernels.js'
import type { KvCache } from './kv-cache.js'
import { extraBlockTensors, neoxToNormOrder, permutedRow, permuteHeads } from './model/architectures.js'
import type { ModelFile } from './model/model-file.js'
import { applyRopeMagnitude } from './model/rope-config.js'
import { moeForward } from './moe-block.js'
import { qkvMatmul } from './qkv.js'
import { rowBytes } from './quant/codecs.js'
import type { Scratch } from './scratch.js'
import type { BlockTensor, ModelConfig, MoeParams, TensorName, WeightMatrix } from './types.js'

/**
 * The weights of one transformer block (llama2.c TransformerWeights, one layer). Matrices that
 * multiply the same input are stacked row-wise into one (wqkv = [wq; wk; wv], w13 = [w1; w3]):
 * every output row is still its own dot product, so the bits do not change, and a decode step
 * makes 4 kernel calls per block instead of 7 (each call wakes the kernel threads).
 */
export type BlockWeights = BlockMatrices

/** Matrices with the same dtype and columns stacked row-wise (stored rows are self-contained). */
function stackRows(ms: readonly WeightMatrix[]): WeightMatrix {
  const { dtype, cols } = ms[0]
  if (ms.some((m) => m.dtype !== dtype || m.cols !== cols))
    throw new InvalidModelError('cannot stack matrices of different dtype or width')
  const data = new Uint8Array(ms.reduce((n, m) => n + m.data.byteLength, 0))
  let at = 0
  for (const m of ms) {
    data.set(m.data, at)
    at += m.data.byteLength
  }
  return { dtype, cols, rows: ms.reduce((n, m) => n + m.rows, 0), data }
}

/**
 * Tensors stacked row-wise and prepared for the kernels. Where both sides can (GGUF files,
 * FastKernels), the file is read straight into kernel memory, so the only resident copy of a
 * weight is the kernels' one; otherwise read, stack, prepare, and the file copies become garbage.
 */
export function loadMatrices(
  model: ModelFile,
  names: readonly TensorName[],
  kernels: Kernels,
  rowOrder?: (name: TensorName) => Int32Array | null,
  options?: PrepareOptions
): WeightMatrix {
  const { matrixInfo, readMatrixInto: readInto } = model
  // A tensor whose rows are reordered (NEOX Q/K, see neoxToNormOrder) is read whole, then its
  // rows copied to their new places; stored rows are self-contained in every dtype.
  const readMatrixInto =
    readInto &&
    ((name: TensorName, into: Uint8Array): void => {
      const order = rowOrder?.(name)
      if (!order || !matrixInfo) {
        readInto.call(model, name, into)
        return
      }
      const tmp = new Uint8Array(into.byteLength)
      readInto.call(model, name, tmp)
      const { rows } = matrixInfo.call(model, name)
      reorderRows(tmp, into, into.byteLength / rows, order)
    })
  if (matrixInfo && readMatrixInto && kernels.prepareInto) {
    const infos = names.map((n) => matrixInfo.call(model, n))
    const { dtype, cols } = infos[0]
    if (infos.every((i) => i.dtype === dtype && i.cols === cols)) {
      const rows = infos.reduce((n, i) => n + i.rows, 0)
      return kernels.prepareInto(
        { dtype, rows, cols },
        (data) => {
          let at = 0
          names.forEach((n, i) => {
            const bytes = rowBytes(dtype, cols) * infos[i].rows
            readMatrixInto(n, data.subarray(at, at + bytes))
            at += bytes
          })
        },
        options
      )
    }
  }
  const ms = names.map((n) => {
    const m = model.readMatrix(n)
    const order = rowOrder?.(n)
    if (!order) return m
    const data = new Uint8Array(m.data.byteLength)
    reorderRows(m.data, data, rowBytes(m.dtype, m.cols), order)
    return { ...m, data }
  })
  return kernels.prepare(ms.length === 1 ? ms[0] : stackRows(ms))
}

/** Copy rows (rb bytes each) from src to dst, row r of dst from row permutedRow(r, order) of src. */
function reorderRows(src: Uint8Array, dst: Uint8Array, rb: number, order: Int32Array): void {
  const rows = src.byteLength / rb
  for (let r = 0; r < rows; r++) {
    const from = permutedRow(r, order)
    dst.set(src.subarray(from * rb, (from + 1) * rb), r * rb)
  }
}

export function loadBlock(model: ModelFile, layer: number, kernels: Kernels): BlockWeights {
  const c = model.config
  // NEOX RoPE (qwen2, qwen3) runs as NORM on Q/K rows reordered within each head (neoxToNormOrder).
  const order = c.ropeType === 'neox' ? neoxToNormOrder(c.headDim, c.ropeDims) : null
  const qk = (name: TensorName): Int32Array | null =>
    order && (name.endsWith('.attn_q') || name.endsWith('.attn_k')) ? order : null
  const m = (...t: BlockTensor[]): WeightMatrix =>
    loadMatrices(
      model,
      t.map((n) => `blk.${layer}.${n}` as const),
      kernels,
      qk
    )
  const vec = (name: TensorName, permute: boolean): Float32Array => {
    const v = model.readVector(name)
    return permute && order ? permuteHeads(v, order) : v
  }
  const extra = new Set(extraBlockTensors(c))
  let bqkv: Float32Array | undefined
  if (extra.has('attn_q.bias')) {
    bqkv = new Float32Array(c.qDim + 2 * c.kvDim)
    bqkv.set(vec(`blk.${layer}.attn_q.bias`, true), 0)
    bqkv.set(vec(`blk.${layer}.attn_k.bias`, true), c.qDim)
    bqkv.set(vec(`blk.${layer}.attn_v.bias`, false), c.qDim + c.kvDim)
  }
  // Mixtures like Q4_K_M give attn_v another type than attn_q/attn_k in some layers (files
  // without matrixInfo, llama2.c's, hold one dtype throughout).
  const info = model.matrixInfo?.bind(model)
  const separateV = info !== undefined && info(`blk.${layer}.attn_v`).dtype !== info(`blk.${layer}.attn_q`).dtype
  const separateK = info !== undefined && info(`blk.${layer}.attn_k`).dtype !== info(`blk.${layer}.attn_q`).dtype
  return {
    attnNorm: model.readVector(`blk.${layer}.attn_norm`),
    ...(separateK
      ? { wqkv: m('attn_q'), wk: m('attn_k'), wv: m('attn_v') }
      : separateV
        ? { wqkv: m('attn_q', 'attn_k'), wv: m('attn_v') }
        : { wqkv: m('attn_q', 'attn_k', 'attn_v') }),
    bqkv,
    qNorm: extra.has('attn_q_norm') ? vec(`blk.${layer}.attn_q_norm`, true) : undefined,
    kNorm: extra.has('attn_k_norm') ? vec(`blk.${layer}.attn_k_norm`, true) : undefined,
    wo: m('attn_output'),
    ffnNorm: model.readVector(`blk.${layer}.ffn_norm`),
    ...(c.moe
      ? { w13: emptyMatrix(c.dim), w2: emptyMatrix(c.hiddenDim), moe: loadMoe(model, layer, kernels, c.moe) }
      : { w13: m('ffn_gate', 'ffn_up'), w2: m('ffn_down') }),
    layer,
    attnPostNorm: extra.has('post_attention_norm') ? model.readVector(`blk.${layer}.post_attention_norm`) : undefined,
    ffnPostNorm: extra.has('post_ffw_norm') ? model.readVector(`blk.${layer}.post_ffw_norm`) : undefined
  }
}

/** A MoE block's stand-in for the dense w13 / w2 (no rows: the experts are in `moe`). */
function emptyMatrix(cols: number): WeightMatrix {
  return { dtype: 'f32', rows: 0, cols, data: new Uint8Array(0) }
}

/** Block `layer`'s router and experts (gate, up, down per expert). */
function loadMoe(model: ModelFile, layer: number, kernels: Kernels, p: MoeParams): MoeMatrices {
  const blk = `blk.${layer}.` as const
  const router = kernels.prepare(model.readMatrix(`${blk}ffn_gate_inp`))
  if (router.rows !== p.nExperts || router.cols !== model.config.dim)
    throw new InvalidModelError(
      `${model.path}: ${blk}ffn_gate_inp is [${router.rows}, ${router.cols}], need [${p.nExperts}, ${model.config.dim}]`
    )
  // Gate and up stacked into one matrix where they share a type (moe-block.ts swigluFfn).
  const info = model.matrixInfo?.bind(model)
  const ffn = (gate: TensorName, up: TensorName, down: TensorName): ExpertFfn => ({
    ...(info && info(gate).dtype === info(up).dtype
      ? { gate: loadMatrices(model, [gate, up], kernels) }
      : { gate: loadMatrices(model, [gate], kernels), up: loadMatrices(model, [up], kernels) }),
    down: loadMatrices(model, [down], kernels)
  })
  const experts: ExpertFfn[] = []
  for (let e = 0; e < p.nExperts; e++)
    experts.push(ffn(`${blk}ffn_gate_exps.${e}`, `${blk}ffn_up_exps.${e}`, `${blk}ffn_down_exps.${e}`))
  if (p.sharedHidden === 0) return { router, experts }
  // qwen2moe's shared expert; its gate vector [dim] multiplies as a one-row f32 matrix (ggml_mul_mat).
  const gateInp = model.readVector(`${blk}ffn_gate_inp_shexp`)
  const data = new Uint8Array(Float32Array.from(gateInp).buffer)
  const shared = {
    gateInp: kernels.prepare({ dtype: 'f32', rows: 1, cols: gateInp.length, data }),
    ...ffn(`${blk}ffn_gate_shexp`, `${blk}ffn_up_shexp`, `${blk}ffn_down_shexp`)
  }
  return { router, experts, shared }
}

const ffnBytes = (f: ExpertFfn): number => f.gate.data.byteLength + (f.up?.data.byteLength ?? 0) + f.down.data.byteLength

/** Bytes of a block's weights (matrices as stored, norms as f32). */
export function blockWeightBytes(b: BlockWeights): number {
  const shared = b.moe?.shared ? b.moe.shared.gateInp.data.byteLength + ffnBytes(b.moe.shared) : 0
  const experts = b.moe?.experts.reduce((n, e) => n + ffnBytes(e), b.moe.router.data.byteLength + shared) ?? 0
  const m = [b.wqkv, b.wk, b.wv, b.wo, b.w13, b.w2].reduce((n, w) => n + (w?.data.byteLength ?? 0), experts)
  const extra =
    (b.bqkv?.length ?? 0) +
    (b.qNorm?.length ?? 0) +
    (b.kNorm?.length ?? 0) +
    (b.attnPostNorm?.length ?? 0) +
    (b.ffnPostNorm?.length ?? 0)
  return m + (b.attnNorm.length + b.ffnNorm.length + extra) * 4
}

// Scratch lives in its own file so the Gemma block (family-block.ts) can use it without a cycle.
export { Scratch } from './scratch.js'

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
  // Gemma 2/3: their own op-by-op block (shards/family-block.ts).
  if (config.family) {
    familyBlockForward(kernels, config, w, x, T, startPos, cache, cacheLayer, s)
    return
  }
  // Kernels that run a whole block in one call (the native decode block) take small batches.
  if (!w.moe && !w.wk && kernels.blockForward?.(x, T, startPos, w, cache.layers[cacheLayer], config)) return
  // Activation buffers only for the op-by-op path (a fused block keeps its own in kernel memory).
  s.ensure(T)
  const { dim, qDim, kvDim, hiddenDim, nHeads, nKvHeads, headDim, rmsEps, ropeTheta } = config
  // attention: xb = rmsnorm(x); [q k v] = xb [Wq; Wk; Wv]ᵀ (+ [bq bk bv], qwen2);
  // per-head RMSNorm on q and k (qwen3); RoPE on q and k
  kernels.rmsnorm(s.xb, x, w.attnNorm, T, rmsEps)
  qkvMatmul(kernels, config, w, s, T)
  if (w.bqkv) addBias(s.qkv, w.bqkv, T)
  const [q, k, v] =
    T === 1
      ? [s.qkv.subarray(0, qDim), s.qkv.subarray(qDim, qDim + kvDim), s.qkv.subarray(qDim + kvDim)]
      : split(s.qkv, T, [s.q, s.k, s.v], [qDim, kvDim, kvDim])
  if (w.qNorm) kernels.rmsnorm(q, q, w.qNorm, T * nHeads, rmsEps)
  if (w.kNorm) kernels.rmsnorm(k, k, w.kNorm, T * nKvHeads, rmsEps)
  kernels.rope(q, T, nHeads, headDim, startPos, ropeTheta, s.ropeFreqs)
  kernels.rope(k, T, nKvHeads, headDim, startPos, ropeTheta, s.ropeFreqs)
  applyRopeMagnitude(q, T, nHeads, config)
  applyRopeMagnitude(k, T, nKvHeads, config)
  cache.write(cacheLayer, startPos, T, k, v)
  kernels.attention(s.att, q, cache.layers[cacheLayer], { T, startPos, nHeads, nKvHeads, headDim })
  kernels.matmul(s.xb, s.att, w.wo, T)
  const n = T * dim
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
  // feed-forward: x += W2 (silu(W1 xb) * W3 xb), xb = rmsnorm(x)
  kernels.rmsnorm(s.xb, x, w.ffnNorm, T, rmsEps)
  if (w.moe) {
    moeForward(kernels, config, w.moe, s, T)
    for (let i = 0; i < n; i++) x[i] += s.xb[i]
    return
  }
  kernels.matmul(s.h13, s.xb, w.w13, T)
  const [gate, up] =
    T === 1 ? [s.h13.subarray(0, hiddenDim), s.h13.subarray(hiddenDim)] : split(s.h13, T, [s.hb, s.hb2], [hiddenDim, hiddenDim])
  kernels.swiglu(gate, up, T * hiddenDim)
  kernels.matmul(s.xb, gate, w.w2, T)
  for (let i = 0; i < n; i++) x[i] += s.xb[i]
}

/** rows[t] += bias for each of the T rows (bias.length wide), in float32 as ggml_add. */
function addBias(rows: Float32Array, bias: Float32Array, T: number): void {
  const n = bias.length
  for (let t = 0; t < T; t++) for (let i = 0; i < n; i++) rows[t * n + i] += bias[i]
}

/** Rows [T, Σ widths] of a stacked matmul's output, copied apart into outs[i] [T, widths[i]]. */
function split(src: Float32Array, T: number, outs: Float32Array[], widths: number[]): Float32Array[] {
  const stride = widths.reduce((a, b) => a + b, 0)
  for (let t = 0; t < T; t++) {
    let at = t * stride
    for (let i = 0; i < outs.length; i++) {
      outs[i].set(src.subarray(at, at + widths[i]), t * widths[i])
      at += widths[i]
    }
  }
  return outs
}
