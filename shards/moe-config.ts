import { InvalidModelError, UnsupportedModelError } from './errors.js'
import type { Architecture, MoeParams } from './types.js'

/*
 * Mixture-of-experts hyper-parameters as llama.cpp reads them (src/llama-model.cpp
 * load_hparams; src/models/qwen3moe.cpp, qwen2moe.cpp, llama.cpp):
 *  - qwen3moe: `expert_count`, `expert_used_count`, `expert_feed_forward_length` (n_ff /
 *    n_expert_used when absent); the top-k weights are renormalised (build_moe_ffn norm_w = true).
 *  - qwen2moe: the same keys, weights not renormalised (norm_w = false), plus a shared expert
 *    of `expert_shared_feed_forward_length` (n_ff when absent) gated by
 *    sigmoid(ffn_gate_inp_shexp · x).
 *  - llama with `llama.expert_count` > 0 (Mixtral): each expert's FFN is `feed_forward_length`
 *    wide (the stacks are {n_embd, n_ff, n_expert}); norm_w = true. llama.cpp builds the dense
 *    FFN when expert_count is 0, so a llama file with ffn_gate_inp but no expert_count is
 *    refused. llama.cpp's llama loader has ffn_gate_exps optional (an up-only expert); no
 *    published file has that shape and it is refused here.
 * `expert_weights_scale` is not read for these three (llama.cpp leaves it 0 for them).
 * Not yet: gpt-oss.
 */
export const MOE_ARCHITECTURES: readonly Architecture[] = ['qwen3moe', 'qwen2moe']

type NumberKey = (key: string, fallback?: number) => number

export function moeFromGguf(
  a: Architecture,
  k: NumberKey,
  path: string,
  hasTensor: (name: string) => boolean
): MoeParams | undefined {
  const router = hasTensor('blk.0.ffn_gate_inp.weight')
  const mixtral = a === 'llama' && (k('expert_count', 0) > 0 || router)
  if (!MOE_ARCHITECTURES.includes(a) && !mixtral) {
    if (router)
      throw new UnsupportedModelError(
        `${path}: a mixture of experts in a ${a} model is not supported (supported: llama, ${MOE_ARCHITECTURES.join(', ')})`
      )
    return undefined
  }
  const nExperts = k('expert_count', 0)
  const nUsed = k('expert_used_count', 0)
  if (!Number.isInteger(nExperts) || nExperts < 1 || !Number.isInteger(nUsed) || nUsed < 1 || nUsed > nExperts)
    throw new InvalidModelError(`${path}: ${a} needs 1 ≤ expert_used_count (${nUsed}) ≤ expert_count (${nExperts})`)
  if (!router) throw new InvalidModelError(`${path}: a ${a} mixture of experts needs blk.N.ffn_gate_inp.weight`)
  if (!hasTensor('blk.0.ffn_gate_exps.weight') && !hasTensor('blk.0.ffn_gate.0.weight'))
    throw new UnsupportedModelError(`${path}: ${a} experts without ffn_gate_exps (up-only experts) are not supported`)
  const nFf = k('feed_forward_length', 0)
  const expertHidden = mixtral ? nFf : k('expert_feed_forward_length', Math.floor(nFf / nUsed))
  const sharedHidden = a === 'qwen2moe' ? k('expert_shared_feed_forward_length', nFf) : 0
  if (!Number.isInteger(expertHidden) || expertHidden < 1)
    throw new InvalidModelError(`${path}: ${a} needs an expert FFN size above 0`)
  if (a === 'qwen2moe' && !(Number.isInteger(sharedHidden) && sharedHidden >= 1))
    throw new InvalidModelError(`${path}: qwen2moe needs a shared expert FFN size above 0`)
  return { nExperts, nUsed, expertHidden, normTopK: a !== 'qwen2moe', sharedHidden }
}
