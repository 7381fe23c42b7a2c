import { InvalidModelError, UnsupportedModelError } from '../errors.js'
import type { Architecture, FamilyParams, ModelConfig } from '../types.js'
import type { GgufValue } from './model-file.js'

/**
 * Gemma 2 / Gemma 3 hyper-parameters from GGUF, as llama.cpp reads them
 * (src/models/gemma2.cpp and gemma3.cpp load_arch_hparams, llama_hparams defaults):
 *  - gemma2: sliding window on every other layer (period 2, window 4096 unless
 *    `attention.sliding_window` says otherwise), attention soft-cap 50 and final soft-cap 30
 *    unless `attn_logit_softcapping` / `final_logit_softcapping` say otherwise; the sliding
 *    layers use `rope.freq_base_swa` (default: the global base) at the global linear scale.
 *  - gemma3: sliding layers only when `attention.sliding_window` is present and > 0 (period 6:
 *    five local layers then a global one); local RoPE base `rope.freq_base_swa` (default 10000)
 *    at scale 1, the global base and linear scaling from the usual keys; no attention soft-cap,
 *    a final soft-cap only when the file has one.
 *  - both: GeGLU, post-attention and post-FFN norms, embeddings × sqrtf(dim), queries × 1/√headDim
 *    (1/√(dim/heads) for the 27B shapes: 46 layers for gemma2, 62 for gemma3).
 */
export const GEMMA_ARCHITECTURES: readonly Architecture[] = ['gemma2', 'gemma3']

/** `<arch>.key` as a number (with a default), as architectures.ts reads the other keys. */
type NumberKey = (key: string, fallback?: number) => number

export function familyFromGguf(
  a: Architecture,
  k: NumberKey,
  meta: ReadonlyMap<string, GgufValue>,
  path: string,
  ropeFreqScale: number,
  dim: number,
  nHeads: number,
  headDim: number
): FamilyParams {
  const nLayers = k('block_count')
  const pattern = meta.get(`${a}.attention.sliding_window_pattern`)
  if (pattern !== undefined && typeof pattern !== 'number' && typeof pattern !== 'bigint')
    throw new UnsupportedModelError(`${path}: a per-layer ${a}.attention.sliding_window_pattern array is not supported`)
  const theta = k('rope.freq_base', 10000)
  let slidingWindow = 0
  let swaPeriod = 1
  if (a === 'gemma2') {
    slidingWindow = k('attention.sliding_window', 4096)
    swaPeriod = k('attention.sliding_window_pattern', 2)
  } else {
    const w = k('attention.sliding_window', 0)
    if (w > 0) {
      slidingWindow = w
      swaPeriod = k('attention.sliding_window_pattern', 6)
    }
  }
  const params: FamilyParams = {
    ffnAct: 'gelu',
    postNorms: true,
    embedScale: Math.fround(Math.sqrt(dim)),
    attnScale: gemmaAttnScale(a, nLayers, dim, nHeads, headDim),
    attnSoftcap: a === 'gemma2' ? k('attn_logit_softcapping', 50) : 0,
    finalSoftcap: k('final_logit_softcapping', a === 'gemma2' ? 30 : 0),
    slidingWindow,
    swaPeriod,
    ropeThetaSwa: k('rope.freq_base_swa', a === 'gemma2' ? theta : 10000),
    ropeFreqScaleSwa: a === 'gemma2' ? ropeFreqScale : 1
  }
  for (const [name, v] of Object.entries(params)) {
    if (typeof v === 'number' && !(Number.isFinite(v) && v >= 0))
      throw new InvalidModelError(`${path}: ${a} ${name} ${v} is not a non-negative number`)
  }
  if (!Number.isInteger(swaPeriod) || swaPeriod < 0 || !Number.isInteger(slidingWindow))
    throw new InvalidModelError(`${path}: sliding window ${slidingWindow} / pattern ${swaPeriod} are not whole numbers`)
  if (a === 'gemma2' && slidingWindow === 0) throw new InvalidModelError(`${path}: gemma2 needs a sliding window above 0`)
  if (!(params.ropeThetaSwa > 0)) throw new InvalidModelError(`${path}: rope.freq_base_swa must be positive`)
  return params
}

/** f_attention_scale: 1/√headDim, or 1/√(dim / heads) for the 27B shapes (Gemma's config.py query_pre_attn_scalar). */
export function gemmaAttnScale(a: Architecture, nLayers: number, dim: number, nHeads: number, headDim: number): number {
  const big = (a === 'gemma2' && nLayers === 46) || (a === 'gemma3' && nLayers === 62)
  return Math.fround(1 / Math.sqrt(big ? dim / nHeads : headDim))
}

/** Whether layer `layer` attends through the sliding window (llama_hparams::set_swa_pattern). */
export function isSlidingLayer(c: ModelConfig, layer: number): boolean {
  const f = c.family
  if (!f || f.slidingWindow <= 0) return false
  return f.swaPeriod === 0 || layer % f.swaPeriod < f.swaPeriod - 1
}

/**
 * Gemma 2 / 3's chat template as their tokenizer_config.json ships it (google/gemma-2-2b-it);
 * llama.cpp recognises it by `<start_of_turn>` (llm_chat_detect_template).
 */
export const GEMMA_CHAT_TEMPLATE =
  "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" +
  "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
  "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}" +
  "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"

/**
 * Phi-3's chat template as microsoft/Phi-3-mini-4k-instruct's tokenizer_config.json ships it;
 * llama.cpp recognises it by `<|assistant|>` and `<|end|>` (LLM_CHAT_TEMPLATE_PHI_3).
 */
export const PHI3_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}" +
  "{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}" +
  "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
