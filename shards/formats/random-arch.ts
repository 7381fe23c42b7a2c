import { llama3RopeFactors, SUPPORTED_ARCHITECTURES } from '../architectures.js'
import { InvalidArgumentError } from '../errors.js'
import type { Architecture, ModelConfig, TensorName } from '../types.js'
import type { GgufTypedValue } from './gguf-values.js'

// Family-specific parts of random models (shards/formats/random-model.ts): how a qwen2, qwen3 or
// scaled-RoPE llama file differs from the plain Llama 2 one, as llama.cpp's converter writes
// each (convert_hf_to_gguf.py Qwen2Model, Qwen3Model, LlamaModel).

/** What `make-model --arch` asks for on top of a shape. */
export interface ArchSpec {
  readonly architecture: Architecture
  /** Head size (qwen3 key_length); dim / heads when omitted. */
  readonly headDim?: number
  /** RoPE base θ (default 10000; Llama 3 uses 500000, Qwen 1000000). */
  readonly ropeTheta?: number
  /** RoPE scaling: llama3 writes the rope_freqs tensor, linear writes rope.scaling.* keys. */
  readonly ropeScaling?: 'none' | 'llama3' | 'linear'
  /** Scaling factor (llama3 default 8, linear default 2). */
  readonly ropeScalingFactor?: number
}

export const PLAIN_LLAMA: ArchSpec = { architecture: 'llama' }

export function validateArchSpec(a: ArchSpec): void {
  if (!SUPPORTED_ARCHITECTURES.includes(a?.architecture))
    throw new InvalidArgumentError(`arch must be one of ${SUPPORTED_ARCHITECTURES.join(', ')}, got ${a?.architecture}`)
  if (a.headDim !== undefined && (!Number.isSafeInteger(a.headDim) || a.headDim < 2 || a.headDim % 2 !== 0))
    throw new InvalidArgumentError(`head size must be an even integer >= 2, got ${a.headDim}`)
  if (a.headDim !== undefined && a.architecture !== 'qwen3')
    throw new InvalidArgumentError('a head size independent of dim / heads is a qwen3 feature')
  if (a.ropeTheta !== undefined && !(a.ropeTheta > 0 && Number.isFinite(a.ropeTheta)))
    throw new InvalidArgumentError(`ropeTheta must be positive, got ${a.ropeTheta}`)
  if (a.ropeScaling !== undefined && !['none', 'llama3', 'linear'].includes(a.ropeScaling))
    throw new InvalidArgumentError(`rope scaling must be none, llama3 or linear, got ${a.ropeScaling}`)
  if (a.ropeScalingFactor !== undefined && !(a.ropeScalingFactor >= 1 && Number.isFinite(a.ropeScalingFactor)))
    throw new InvalidArgumentError(`rope scaling factor must be >= 1, got ${a.ropeScalingFactor}`)
}

/** The config of `base` (a plain Llama config of the shape) as family `a`. */
export function archConfig(base: ModelConfig, a: ArchSpec): ModelConfig {
  validateArchSpec(a)
  const headDim = a.headDim ?? base.headDim
  const ropeTheta = Math.fround(a.ropeTheta ?? base.ropeTheta)
  const scaling = a.ropeScaling ?? 'none'
  const factor = a.ropeScalingFactor ?? (scaling === 'llama3' ? 8 : 2)
  return {
    ...base,
    architecture: a.architecture,
    headDim,
    qDim: base.nHeads * headDim,
    kvDim: base.nKvHeads * headDim,
    ropeTheta,
    ropeType: a.architecture === 'llama' ? 'norm' : 'neox',
    ropeFreqScale: scaling === 'linear' ? 1 / Math.fround(factor) : 1,
    ropeFreqFactors: scaling === 'llama3' ? llama3RopeFactors(headDim, ropeTheta, { factor }) : null,
    qkvBias: a.architecture === 'qwen2',
    qkNorm: a.architecture === 'qwen3'
  }
}

/** A vector tensor a family adds: its name, length and contents. */
export interface ExtraVector {
  readonly name: TensorName
  readonly length: number
  /** 'bias': uniform ±0.5 around 0; 'norm': 1 ± 0.1 as the other norms; or fixed values. */
  readonly fill: 'bias' | 'norm' | readonly number[]
}

/** Extra vectors in llama.cpp's order: rope_freqs first, then per block after attn_v. */
export function archGlobalVectors(c: ModelConfig): ExtraVector[] {
  return c.ropeFreqFactors ? [{ name: 'rope_freqs', length: c.headDim / 2, fill: c.ropeFreqFactors }] : []
}

export function archBlockVectors(c: ModelConfig, layer: number): ExtraVector[] {
  const out: ExtraVector[] = []
  if (c.qkvBias) {
    out.push({ name: `blk.${layer}.attn_q.bias`, length: c.qDim, fill: 'bias' })
    out.push({ name: `blk.${layer}.attn_k.bias`, length: c.kvDim, fill: 'bias' })
    out.push({ name: `blk.${layer}.attn_v.bias`, length: c.kvDim, fill: 'bias' })
  }
  if (c.qkNorm) {
    out.push({ name: `blk.${layer}.attn_q_norm`, length: c.headDim, fill: 'norm' })
    out.push({ name: `blk.${layer}.attn_k_norm`, length: c.headDim, fill: 'norm' })
  }
  return out
}

/**
 * llamaGgufMetadata's entries rewritten for family c: `llama.*` keys under the family's
 * prefix, key/value head sizes when they differ from dim / heads, linear scaling keys.
 */
export function archMetadata(entries: Array<[string, GgufTypedValue]>, c: ModelConfig): Array<[string, GgufTypedValue]> {
  const a = c.architecture
  const out = entries.map(([k, v]): [string, GgufTypedValue] => {
    if (k === 'general.architecture') return [k, { type: 'string', value: a }]
    if (k.startsWith('llama.')) return [`${a}.${k.slice(6)}`, v]
    return [k, v]
  })
  const at = out.findIndex(([k]) => k === `${a}.attention.layer_norm_rms_epsilon`)
  const add: Array<[string, GgufTypedValue]> = []
  if (c.headDim * c.nHeads !== c.dim || a === 'qwen3') {
    add.push([`${a}.attention.key_length`, { type: 'u32', value: c.headDim }])
    add.push([`${a}.attention.value_length`, { type: 'u32', value: c.headDim }])
  }
  if (c.ropeFreqScale !== 1) {
    add.push([`${a}.rope.scaling.type`, { type: 'string', value: 'linear' }])
    add.push([`${a}.rope.scaling.factor`, { type: 'f32', value: 1 / c.ropeFreqScale }])
  }
  out.splice(at + 1, 0, ...add)
  return out
}
