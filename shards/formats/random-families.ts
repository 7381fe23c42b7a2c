import { InvalidArgumentError } from '../errors.js'
import type { Architecture, ModelConfig } from '../types.js'
import type { GgufTypedValue } from './gguf-values.js'

// Random phi3 and mixture-of-experts files (issue 34): the config fields and GGUF keys that
// llama.cpp's converter writes for them (conversion/phi.py Phi3MiniModel, Qwen3MoeModel,
// Qwen2MoeModel, LlamaModel for Mixtral), so that the engine
// reads a random file back exactly as it reads a converted one. Their fused / stacked tensors
// are laid out by random-fused.ts.

/** The ArchSpec fields these families read (random-arch.ts; not imported, to keep the folder acyclic). */
interface FamilySpec {
  readonly architecture: Architecture
  readonly ropeDims?: number
  readonly longrope?: boolean
  readonly experts?: ExpertSpec
}

/** Experts, experts used per token, expert FFN size; qwen2moe's shared expert FFN size (default 4 × hidden). */
export interface ExpertSpec {
  readonly count: number
  readonly used: number
  readonly hidden: number
  readonly shared?: number
}

/** Architectures whose random files have experts: required for the MoE ones, optional for llama (Mixtral). */
const EXPERT_ARCHITECTURES: readonly Architecture[] = ['qwen3moe', 'qwen2moe', 'llama']

/** Original context of random longrope files; their context_length does not exceed it (short factors). */
const LONGROPE_ORIG_CTX = 4096

export function validateFamilySpec(a: FamilySpec): void {
  if (a.ropeDims !== undefined && (!Number.isSafeInteger(a.ropeDims) || a.ropeDims < 2 || a.ropeDims % 2 !== 0))
    throw new InvalidArgumentError(`rope dims must be an even integer >= 2, got ${a.ropeDims}`)
  if (a.ropeDims !== undefined && a.architecture === 'llama') throw new InvalidArgumentError('llama has no partial rotary')
  if (a.longrope && a.architecture !== 'phi3') throw new InvalidArgumentError('longrope is a phi3 option')
  const moeArch = a.architecture === 'qwen3moe' || a.architecture === 'qwen2moe'
  if (moeArch && a.experts === undefined) throw new InvalidArgumentError(`${a.architecture} needs experts`)
  if (a.experts !== undefined && !EXPERT_ARCHITECTURES.includes(a.architecture))
    throw new InvalidArgumentError(`experts go with ${EXPERT_ARCHITECTURES.join(', ')} only`)
  const e = a.experts
  if (e?.shared !== undefined && a.architecture !== 'qwen2moe')
    throw new InvalidArgumentError('a shared expert is a qwen2moe option')
  if (e?.shared !== undefined && !(Number.isSafeInteger(e.shared) && e.shared >= 1))
    throw new InvalidArgumentError(`shared expert FFN size ${e.shared} is not valid`)
  if (e && !(Number.isSafeInteger(e.count) && Number.isSafeInteger(e.used) && e.used >= 1 && e.used <= e.count))
    throw new InvalidArgumentError(`experts need 1 <= used (${e.used}) <= count (${e.count})`)
  if (e && !(Number.isSafeInteger(e.hidden) && e.hidden >= 1))
    throw new InvalidArgumentError(`expert FFN size ${e.hidden} is not valid`)
}

/** Deterministic longrope factors ≥ 1 (short ≈ 1–3, long up to ≈ 30, as Phi-3's). */
export function longropeFactors(n: number, which: 'short' | 'long'): number[] {
  const top = which === 'short' ? 2 : 29
  return Array.from({ length: n }, (_, j) => Math.fround(1 + (top * ((j * 7919) % n)) / Math.max(1, n - 1)))
}

/** The longrope attn factor the converter writes: √(1 + ln(scale) / ln(orig)), scale = 131072 / orig. */
function longropeAttnFactor(): number {
  return Math.fround(Math.sqrt(1 + Math.log(131072 / LONGROPE_ORIG_CTX) / Math.log(LONGROPE_ORIG_CTX)))
}

export function familyConfigFields(a: FamilySpec, headDim: number, base: ModelConfig): Partial<ModelConfig> {
  const out: { -readonly [K in keyof ModelConfig]?: ModelConfig[K] } = {}
  if (a.ropeDims !== undefined) {
    if (a.ropeDims > headDim) throw new InvalidArgumentError(`rope dims ${a.ropeDims} exceed the head size ${headDim}`)
    if (a.ropeDims < headDim) out.ropeDims = a.ropeDims
  }
  if (a.longrope) {
    if (base.seqLen > LONGROPE_ORIG_CTX)
      throw new InvalidArgumentError(`a random longrope file keeps its context ≤ ${LONGROPE_ORIG_CTX}`)
    out.ropeFreqFactors = longropeFactors((a.ropeDims ?? headDim) / 2, 'short')
    out.ropeMagnitude = longropeAttnFactor()
  }
  if (a.experts) {
    out.moe = {
      nExperts: a.experts.count,
      nUsed: a.experts.used,
      expertHidden: a.experts.hidden,
      // qwen2moe keeps the top-k softmax weights as they are (build_moe_ffn norm_w = false).
      normTopK: a.architecture !== 'qwen2moe',
      sharedHidden: a.architecture === 'qwen2moe' ? (a.experts.shared ?? 4 * a.experts.hidden) : 0
    }
    out.hiddenDim = a.experts.hidden
  }
  return out
}

/** The keys llama.cpp reads for these families (rope-config.ts, moe-config.ts read them back). */
export function familyMetadata(c: ModelConfig): Array<[string, GgufTypedValue]> {
  const a = c.architecture
  const u32 = (key: string, value: number): [string, GgufTypedValue] => [`${a}.${key}`, { type: 'u32', value }]
  const out: Array<[string, GgufTypedValue]> = []
  if (c.ropeDims !== undefined) out.push(u32('rope.dimension_count', c.ropeDims))
  if (a === 'phi3' && c.ropeFreqFactors) {
    out.push(u32('rope.scaling.original_context_length', LONGROPE_ORIG_CTX))
    out.push([`${a}.rope.scaling.attn_factor`, { type: 'f32', value: c.ropeMagnitude ?? 1 }])
  }
  if (c.moe) {
    out.push(u32('expert_count', c.moe.nExperts), u32('expert_used_count', c.moe.nUsed))
    // Mixtral's expert width is llama.feed_forward_length itself (= hiddenDim, written by the base keys).
    if (a !== 'llama') out.push(u32('expert_feed_forward_length', c.moe.expertHidden))
    if (c.moe.sharedHidden > 0) out.push(u32('expert_shared_feed_forward_length', c.moe.sharedHidden))
  }
  return out
}
