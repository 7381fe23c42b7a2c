import { InvalidModelError } from './errors.js'
import type { Architecture, MoeParams } from './types.js'

/*
 * Mixture-of-experts hyper-parameters as llama.cpp reads them (src/llama-model.cpp
 * load_hparams, src/models/qwen3moe.cpp, qwen2moe.cpp): `expert_count`, `expert_used_count`,
 * `expert_feed_forward_length` (qwen3moe: n_ff / n_expert_used when absent). qwen3moe
 * renormalises the top-k weights (build_moe_ffn norm_w = true). Not yet: qwen2moe's shared
 * expert, Mixtral (llama + ffn_gate_inp), gpt-oss.
 */
export const MOE_ARCHITECTURES: readonly Architecture[] = ['qwen3moe']

type NumberKey = (key: string, fallback?: number) => number

export function moeFromGguf(a: Architecture, k: NumberKey, path: string): MoeParams | undefined {
  if (!MOE_ARCHITECTURES.includes(a)) return undefined
  const nExperts = k('expert_count', 0)
  const nUsed = k('expert_used_count', 0)
  if (!Number.isInteger(nExperts) || nExperts < 1 || !Number.isInteger(nUsed) || nUsed < 1 || nUsed > nExperts)
    throw new InvalidModelError(`${path}: ${a} needs 1 ≤ expert_used_count (${nUsed}) ≤ expert_count (${nExperts})`)
  const expertHidden = k('expert_feed_forward_length', a === 'qwen3moe' ? Math.floor(k('feed_forward_length', 0) / nUsed) : 0)
  const sharedHidden = 0
  if (!Number.isInteger(expertHidden) || expertHidden < 1)
    throw new InvalidModelError(`${path}: ${a} needs expert_feed_forward_length above 0`)
  return { nExperts, nUsed, expertHidden, normTopK: a === 'qwen3moe', sharedHidden }
}
