import { InvalidArgumentError } from '../errors.js'
import { llama3RopeFactors, SUPPORTED_ARCHITECTURES } from '../model/architectures.js'
import { GEMMA_ARCHITECTURES, GEMMA_CHAT_TEMPLATE, gemmaAttnScale, PHI3_CHAT_TEMPLATE } from '../model/family-config.js'
import type { Architecture, ModelConfig, TensorName } from '../types.js'
import type { GgufTypedValue } from './gguf-values.js'
import { type ExpertSpec, familyConfigFields, familyMetadata, longropeFactors, validateFamilySpec } from './random-families.js'

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
  /** Gemma: sliding window (gemma2 default 4096, gemma3 default none) and its layer period (2 / 6). */
  readonly slidingWindow?: number
  readonly swaPattern?: number
  /** Gemma 2: attention and final soft-caps (defaults 50 and 30; gemma3: final only, default none). */
  readonly attnSoftcap?: number
  readonly finalSoftcap?: number
  /** Gemma 3: RoPE base of the sliding layers (default 10000). */
  readonly ropeThetaSwa?: number
  /** Partial rotary: RoPE rotates this many dims of each head (phi3, qwen*; rope.dimension_count). */
  readonly ropeDims?: number
  /** phi3: longrope short/long factors and attn factor (shards/model/rope-config.ts). */
  readonly longrope?: boolean
  /** qwen3moe, qwen2moe, llama (Mixtral): experts, used per token, expert FFN size, qwen2moe's shared expert (shards/moe-config.ts). */
  readonly experts?: ExpertSpec
}

export const PLAIN_LLAMA: ArchSpec = { architecture: 'llama' }

export function validateArchSpec(a: ArchSpec): void {
  if (!SUPPORTED_ARCHITECTURES.includes(a?.architecture))
    throw new InvalidArgumentError(`arch must be one of ${SUPPORTED_ARCHITECTURES.join(', ')}, got ${a?.architecture}`)
  if (a.headDim !== undefined && (!Number.isSafeInteger(a.headDim) || a.headDim < 2 || a.headDim % 2 !== 0))
    throw new InvalidArgumentError(`head size must be an even integer >= 2, got ${a.headDim}`)
  const gemma = GEMMA_ARCHITECTURES.includes(a.architecture)
  if (a.headDim !== undefined && a.architecture !== 'qwen3' && a.architecture !== 'qwen3moe' && !gemma)
    throw new InvalidArgumentError('a head size independent of dim / heads is a qwen3 and gemma feature')
  for (const f of ['slidingWindow', 'swaPattern', 'attnSoftcap', 'finalSoftcap', 'ropeThetaSwa'] as const) {
    const v = a[f]
    if (v === undefined) continue
    if (!gemma) throw new InvalidArgumentError(`${f} is a gemma2 / gemma3 option`)
    if (!(Number.isFinite(v) && v >= 0)) throw new InvalidArgumentError(`${f} must be a non-negative number, got ${v}`)
  }
  if (a.architecture === 'gemma2' && a.slidingWindow === 0)
    throw new InvalidArgumentError('gemma2 needs a sliding window above 0')
  if (a.attnSoftcap !== undefined && a.architecture !== 'gemma2')
    throw new InvalidArgumentError('attention soft-capping is a gemma2 feature')
  if (a.ropeTheta !== undefined && !(a.ropeTheta > 0 && Number.isFinite(a.ropeTheta)))
    throw new InvalidArgumentError(`ropeTheta must be positive, got ${a.ropeTheta}`)
  if (a.ropeScaling !== undefined && !['none', 'llama3', 'linear'].includes(a.ropeScaling))
    throw new InvalidArgumentError(`rope scaling must be none, llama3 or linear, got ${a.ropeScaling}`)
  validateFamilySpec(a)
  if (a.ropeScalingFactor !== undefined && !(a.ropeScalingFactor >= 1 && Number.isFinite(a.ropeScalingFactor)))
    throw new InvalidArgumentError(`rope scaling factor must be >= 1, got ${a.ropeScalingFactor}`)
}

/** The config of `base` (a plain Llama config of the shape) as family `a`. */
export function archConfig(base: ModelConfig, a: ArchSpec): ModelConfig {
  validateArchSpec(a)
  // llama.cpp's qwen2moe loader requires output.weight.
  if (a.architecture === 'qwen2moe' && base.tiedEmbeddings) throw new InvalidArgumentError('qwen2moe has an untied head')
  const headDim = a.headDim ?? base.headDim
  const ropeTheta = Math.fround(a.ropeTheta ?? base.ropeTheta)
  const scaling = a.ropeScaling ?? 'none'
  const factor = a.ropeScalingFactor ?? (scaling === 'llama3' ? 8 : 2)
  const ropeFreqScale = scaling === 'linear' ? 1 / Math.fround(factor) : 1
  const gemma2 = a.architecture === 'gemma2'
  const window = a.slidingWindow ?? (gemma2 ? 4096 : 0)
  const family = GEMMA_ARCHITECTURES.includes(a.architecture)
    ? {
        family: {
          ffnAct: 'gelu' as const,
          postNorms: true,
          embedScale: Math.fround(Math.sqrt(base.dim)),
          attnScale: gemmaAttnScale(a.architecture, base.nLayers, base.dim, base.nHeads, headDim),
          attnSoftcap: gemma2 ? Math.fround(a.attnSoftcap ?? 50) : 0,
          finalSoftcap: Math.fround(a.finalSoftcap ?? (gemma2 ? 30 : 0)),
          slidingWindow: window,
          swaPeriod: window > 0 ? (a.swaPattern ?? (gemma2 ? 2 : 6)) : 1,
          ropeThetaSwa: Math.fround(a.ropeThetaSwa ?? (gemma2 ? ropeTheta : 10000)),
          ropeFreqScaleSwa: gemma2 ? ropeFreqScale : 1
        }
      }
    : {}
  return {
    ...base,
    architecture: a.architecture,
    headDim,
    qDim: base.nHeads * headDim,
    kvDim: base.nKvHeads * headDim,
    ropeTheta,
    ropeType: a.architecture === 'llama' ? 'norm' : 'neox',
    ropeFreqScale,
    ropeFreqFactors: scaling === 'llama3' ? llama3RopeFactors(headDim, ropeTheta, { factor }) : null,
    qkvBias: a.architecture === 'qwen2' || a.architecture === 'qwen2moe',
    qkNorm: a.architecture === 'qwen3' || a.architecture === 'gemma3' || a.architecture === 'qwen3moe',
    ...familyConfigFields(a, headDim, base),
    // Gemma 2's head is token_embd whatever the shape says (llama.cpp reads no output.weight).
    tiedEmbeddings: gemma2 || base.tiedEmbeddings,
    ...family
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
  if (c.architecture === 'phi3' && c.ropeFreqFactors) {
    const n = (c.ropeDims ?? c.headDim) / 2
    return [
      { name: 'rope_factors_long', length: n, fill: longropeFactors(n, 'long') },
      { name: 'rope_factors_short', length: n, fill: c.ropeFreqFactors }
    ]
  }
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
  if (c.family?.postNorms) {
    out.push({ name: `blk.${layer}.post_attention_norm`, length: c.dim, fill: 'norm' })
    out.push({ name: `blk.${layer}.post_ffw_norm`, length: c.dim, fill: 'norm' })
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
  const add: Array<[string, GgufTypedValue]> = []
  if (c.headDim * c.nHeads !== c.dim || a === 'qwen3' || c.family) {
    add.push([`${a}.attention.key_length`, { type: 'u32', value: c.headDim }])
    add.push([`${a}.attention.value_length`, { type: 'u32', value: c.headDim }])
  }
  add.push(...familyMetadata(c))
  if (c.ropeFreqScale !== 1) {
    add.push([`${a}.rope.scaling.type`, { type: 'string', value: 'linear' }])
    add.push([`${a}.rope.scaling.factor`, { type: 'f32', value: 1 / c.ropeFreqScale }])
  }
  const f = c.family
  if (f) {
    // The keys llama.cpp's gemma2 / gemma3 loaders read (family-config.ts reads them back).
    const f32 = (key: string, value: number): [string, GgufTypedValue] => [`${a}.${key}`, { type: 'f32', value }]
    const u32 = (key: string, value: number): [string, GgufTypedValue] => [`${a}.${key}`, { type: 'u32', value }]
    if (a === 'gemma2') add.push(f32('attn_logit_softcapping', f.attnSoftcap))
    if (a === 'gemma2' || f.finalSoftcap > 0) add.push(f32('final_logit_softcapping', f.finalSoftcap))
    if (f.slidingWindow > 0)
      add.push(u32('attention.sliding_window', f.slidingWindow), u32('attention.sliding_window_pattern', f.swaPeriod))
    if (f.ropeThetaSwa !== (a === 'gemma2' ? c.ropeTheta : 10000)) add.push(f32('rope.freq_base_swa', f.ropeThetaSwa))
    // Gemma's own chat template, so `generate --chat` on a random Gemma file renders Gemma turns.
    if (!out.some(([k]) => k === 'tokenizer.chat_template'))
      out.push(['tokenizer.chat_template', { type: 'string', value: GEMMA_CHAT_TEMPLATE }])
  }
  // Phi-3's own chat template, so `generate --chat` on a random phi3 file renders Phi-3 turns.
  if (a === 'phi3' && !out.some(([k]) => k === 'tokenizer.chat_template'))
    out.push(['tokenizer.chat_template', { type: 'string', value: PHI3_CHAT_TEMPLATE }])
  // Keys the family sets anew (rope.dimension_count) replace the Llama ones.
  const keys = new Set(add.map(([k]) => k))
  const kept = out.filter(([k]) => !keys.has(k))
  kept.splice(kept.findIndex(([k]) => k === `${a}.attention.layer_norm_rms_epsilon`) + 1, 0, ...add)
  return kept
}
