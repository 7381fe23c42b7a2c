import { InvalidArgumentError, InvalidModelError, UnsupportedModelError } from '../errors.js'
import type { GgufTensorInfo } from '../formats/gguf-reader.js'
import { moeFromGguf } from '../moe-config.js'
import type { Architecture, BlockExtraTensor, ModelConfig, TensorName } from '../types.js'
import { familyFromGguf, GEMMA_ARCHITECTURES } from './family-config.js'
import type { GgufValue } from './model-file.js'
import { ropeScalingFromGguf } from './rope-config.js'

/**
 * The model families the engine runs and how each reads from GGUF (llama.cpp
 * src/llama-model.cpp llm_load_hparams / build_llama, build_qwen2, build_qwen3):
 *  - llama: Llama 2 / 3.x, Mistral, SmolLM2, TinyLlama. RoPE type NORM (pairs 2i, 2i+1; the
 *    converter permutes Q/K rows for it), optional `rope_freqs` (llama3 scaling) and linear
 *    scaling (`rope.scaling.type = linear`).
 *  - qwen2: as llama plus biases on Q, K and V; RoPE type NEOX (pairs i, i + headDim/2).
 *  - qwen3 (dense): no biases; per-head RMSNorm on Q and K before RoPE (attn_q_norm,
 *    attn_k_norm); head size from attention.key_length, independent of dim / heads; NEOX.
 *  - gemma2, gemma3: GeGLU, post-attention and post-FFN norms, embeddings × √dim, sliding-window
 *    layers, soft-capping (gemma2), Q/K norms and local/global RoPE bases (gemma3); NEOX
 *    (shards/model/family-config.ts, shards/family-block.ts).
 *  - phi3: fused attn_qkv and gate-up ffn_up, read as the Llama tensors' row ranges
 *    (shards/fused-tensors.ts); NEOX; partial rotary and longrope (shards/model/rope-config.ts).
 *  - qwen3moe: qwen3 attention with a mixture-of-experts FFN (shards/moe-config.ts, moe-block.ts).
 *  - qwen2moe: qwen2 attention (biases optional, as create_tensor_qkv reads them) with routed
 *    experts plus a sigmoid-gated shared expert; untied head (llama.cpp requires output.weight).
 *  - llama with `llama.expert_count` (Mixtral): Llama attention with a mixture-of-experts FFN.
 */
export const SUPPORTED_ARCHITECTURES: readonly Architecture[] = [
  'llama',
  'qwen2',
  'qwen3',
  'gemma2',
  'gemma3',
  'phi3',
  'qwen3moe',
  'qwen2moe'
]

/** Tensor name in the GGUF file: biases are stored as `<name>`, everything else as `<name>.weight`. */
export function ggufTensorKey(name: TensorName): string {
  return name.endsWith('.bias') ? name : `${name}.weight`
}

/** The per-block vector tensors an architecture adds to the nine Llama ones. */
export function extraBlockTensors(c: ModelConfig): BlockExtraTensor[] {
  const out: BlockExtraTensor[] = []
  if (c.qkvBias) out.push('attn_q.bias', 'attn_k.bias', 'attn_v.bias')
  if (c.qkNorm) out.push('attn_q_norm', 'attn_k_norm')
  if (c.family?.postNorms) out.push('post_attention_norm', 'post_ffw_norm')
  return out
}

/** Length of an extra block vector. */
export function extraTensorLength(t: BlockExtraTensor, c: ModelConfig): number {
  if (t === 'attn_q.bias') return c.qDim
  if (t === 'attn_k.bias' || t === 'attn_v.bias') return c.kvDim
  if (t === 'post_attention_norm' || t === 'post_ffw_norm') return c.dim
  return c.headDim
}

/** Whether RoPE is plain (no scaling): kernels may use their own θ-only tables. */
export function plainRope(c: ModelConfig): boolean {
  return c.ropeFreqScale === 1 && c.ropeFreqFactors === null && !c.ropeDims && !c.ropeYarn && !c.ropeMagnitude
}

/**
 * Llama 3.1's rope_freqs as llama.cpp's converter writes them (convert_hf_to_gguf.py
 * LlamaModel.generate_extra_tensors, from Meta's apply_scaling): 1 for short wavelengths,
 * `factor` for long ones, a smooth ramp between.
 */
export function llama3RopeFactors(
  headDim: number,
  theta: number,
  o: { factor?: number; lowFreqFactor?: number; highFreqFactor?: number; originalContext?: number } = {}
): number[] {
  const factor = o.factor ?? 8
  const low = o.lowFreqFactor ?? 1
  const high = o.highFreqFactor ?? 4
  const old = o.originalContext ?? 8192
  const lowWavelen = old / low
  const highWavelen = old / high
  const out: number[] = []
  for (let i = 0; i < headDim; i += 2) {
    const freq = 1 / theta ** (i / headDim)
    const wavelen = (2 * Math.PI) / freq
    if (wavelen < highWavelen) out.push(1)
    else if (wavelen > lowWavelen) out.push(factor)
    else {
      const smooth = (old / wavelen - low) / (high - low)
      out.push(1 / ((1 - smooth) / factor + smooth))
    }
  }
  return out.map((x) => Math.fround(x))
}

/*
 * neoxToNormOrder (rope-config.ts): the row order that turns NEOX pairing into NORM pairing
 * within each head: new row 2j is old row j, new row 2j+1 is old row j + n_rot/2. Applying it to
 * the Q and K rows (and their biases and norm weights) lets every kernel rotate adjacent pairs;
 * q·k is unchanged because both sides are permuted alike, and V is left alone.
 */
export { neoxToNormOrder, ropeFrequencies } from './rope-config.js'

/** Row r of the permuted [nHeads * headDim] layout comes from row rowSource(r) of the file. */
export function permutedRow(r: number, order: Int32Array): number {
  const hd = order.length
  return Math.floor(r / hd) * hd + order[r % hd]
}

/** A vector of heads [n * headDim] reordered by `order` (see neoxToNormOrder). */
export function permuteHeads(v: Float32Array, order: Int32Array): Float32Array {
  const out = new Float32Array(v.length)
  for (let r = 0; r < v.length; r++) out[r] = v[permutedRow(r, order)]
  return out
}

function num(meta: ReadonlyMap<string, GgufValue>, key: string, path: string, fallback?: number): number {
  const v = meta.get(key)
  if (v === undefined) {
    if (fallback !== undefined) return fallback
    throw new InvalidModelError(`${path}: GGUF metadata has no ${key}`)
  }
  if (typeof v === 'number') return v
  if (typeof v === 'bigint') return Number(v)
  throw new InvalidModelError(`${path}: GGUF metadata ${key} is not a number`)
}

/** Hyper-parameters from `<arch>.*` keys (llama.cpp's llm_load_hparams). */
export function configFromGguf(
  meta: ReadonlyMap<string, GgufValue>,
  tensors: ReadonlyMap<string, GgufTensorInfo>,
  path: string,
  readVector: (name: string) => Float32Array
): ModelConfig {
  const arch = meta.get('general.architecture')
  if (typeof arch !== 'string' || !(SUPPORTED_ARCHITECTURES as readonly string[]).includes(arch)) {
    throw new UnsupportedModelError(
      `${path}: architecture ${JSON.stringify(arch)} is not supported (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`
    )
  }
  const a = arch as Architecture
  const k = (key: string, fallback?: number) => num(meta, `${a}.${key}`, path, fallback)
  const dim = k('embedding_length')
  const nHeads = k('attention.head_count')
  const nKvHeads = k('attention.head_count_kv', nHeads)
  const embd = tensors.get('token_embd.weight')
  if (!embd) throw new InvalidModelError(`${path}: no token_embd.weight tensor`)
  const headDim = k('attention.key_length', dim / nHeads)
  const valueDim = k('attention.value_length', headDim)
  if (!Number.isInteger(headDim) || headDim % 2 !== 0 || nKvHeads <= 0 || nHeads % nKvHeads !== 0) {
    throw new UnsupportedModelError(`${path}: ${dim} dims over ${nHeads} heads / ${nKvHeads} kv heads is not a valid shape`)
  }
  if (valueDim !== headDim)
    throw new UnsupportedModelError(`${path}: value head size ${valueDim} differs from key head size ${headDim}`)
  const rope = ropeScalingFromGguf(a, k, meta, tensors, path, headDim, readVector)
  const hasBias = tensors.has('blk.0.attn_q.bias')
  const hasQkNorm = tensors.has('blk.0.attn_q_norm.weight')
  if (a === 'qwen2' && !hasBias) throw new InvalidModelError(`${path}: a qwen2 model needs blk.N.attn_q.bias`)
  if (a === 'qwen2moe' && !tensors.has('output.weight'))
    throw new InvalidModelError(`${path}: a qwen2moe model needs output.weight`)
  const qkNorm = a === 'qwen3' || a === 'gemma3' || a === 'qwen3moe'
  const moe = moeFromGguf(a, k, path, (name) => tensors.has(name))
  const gemma = GEMMA_ARCHITECTURES.includes(a)
  if (qkNorm && !hasQkNorm) throw new InvalidModelError(`${path}: a ${a} model needs blk.N.attn_q_norm.weight`)
  const config: ModelConfig = {
    architecture: a,
    dim,
    hiddenDim: moe ? moe.expertHidden : k('feed_forward_length'),
    nLayers: k('block_count'),
    nHeads,
    nKvHeads,
    headDim,
    qDim: nHeads * headDim,
    kvDim: nKvHeads * headDim,
    vocabSize: embd.ne[1],
    seqLen: k('context_length'),
    ropeTheta: k('rope.freq_base', 10000),
    rmsEps: k('attention.layer_norm_rms_epsilon', 1e-5),
    // Gemma 2's head is always token_embd (llama.cpp creates output from TOKEN_EMBD).
    tiedEmbeddings: a === 'gemma2' || !tensors.has('output.weight'),
    ropeType: a === 'llama' ? 'norm' : 'neox',
    ...rope,
    // llama.cpp reads bq/bk/bv when present for llama, qwen2 and qwen2moe (required for qwen2).
    qkvBias: (a === 'llama' || a === 'qwen2' || a === 'qwen2moe') && hasBias,
    ...(moe ? { moe } : {}),
    qkNorm,
    ...(gemma
      ? { family: familyFromGguf(a, (key, fallback) => k(key, fallback), meta, path, rope.ropeFreqScale, dim, nHeads, headDim) }
      : {})
  }
  if (!qkNorm && hasQkNorm) throw new UnsupportedModelError(`${path}: Q/K norms in a ${a} model are not supported`)
  if (!config.qkvBias && hasBias) throw new UnsupportedModelError(`${path}: attention biases in a ${a} model are not supported`)
  if (embd.ne[0] !== dim) throw new InvalidModelError(`${path}: token_embd.weight is ${embd.ne} but the model has ${dim} dims`)
  return config
}

/** Expected [rows, cols] (or [length]) of every tensor the engine reads, to catch inconsistent files early. */
export function expectedShape(name: string, c: ModelConfig): [number, number] | [number] | undefined {
  if (name === 'token_embd' || name === 'output') return [c.vocabSize, c.dim]
  if (name === 'output_norm') return [c.dim]
  if (name === 'rope_freqs') return [c.headDim / 2]
  const m = /^blk\.(\d+)\.([\w.]+)$/.exec(name)
  if (!m) return undefined
  switch (m[2]) {
    case 'attn_norm':
    case 'ffn_norm':
      return [c.dim]
    case 'attn_q':
      return [c.qDim, c.dim]
    case 'attn_output':
      return [c.dim, c.qDim]
    case 'attn_k':
    case 'attn_v':
      return [c.kvDim, c.dim]
    case 'ffn_gate':
    case 'ffn_up':
      return [c.hiddenDim, c.dim]
    case 'ffn_down':
      return [c.dim, c.hiddenDim]
    case 'ffn_gate_inp':
      return c.moe ? [c.moe.nExperts, c.dim] : undefined
    case 'ffn_gate_shexp':
    case 'ffn_up_shexp':
      return c.moe ? [c.moe.sharedHidden, c.dim] : undefined
    case 'ffn_down_shexp':
      return c.moe ? [c.dim, c.moe.sharedHidden] : undefined
    case 'ffn_gate_inp_shexp':
      return [c.dim]
    case 'attn_q.bias':
    case 'attn_k.bias':
    case 'attn_v.bias':
    case 'attn_q_norm':
    case 'attn_k_norm':
    case 'post_attention_norm':
    case 'post_ffw_norm':
      return [extraTensorLength(m[2], c)]
  }
  return undefined
}

/** Defaults of the fields a plain Llama 2 config has (llama2.c files, random models). */
export function llamaDefaults(headDim: number, nHeads: number) {
  if (!Number.isInteger(headDim) || headDim < 2) throw new InvalidArgumentError(`head size ${headDim} is not valid`)
  return {
    qDim: nHeads * headDim,
    ropeType: 'norm' as const,
    ropeFreqScale: 1,
    ropeFreqFactors: null,
    qkvBias: false,
    qkNorm: false
  }
}
