import { InvalidArgumentError } from '../errors.js'
import type { ModelConfig, TensorName, WeightDType } from '../types.js'
import { ggmlTypeOf } from './ggml-types.js'

/**
 * Whole-file quantisation types (what `make-model --dtype` and llama.cpp's `llama-quantize`
 * take) and the per-tensor type each one gives, following llama.cpp's llama_tensor_get_type
 * (src/llama-quant.cpp) for a Llama model without an importance matrix:
 *
 * - 1-D tensors (norm weights) stay F32 in every file type.
 * - F32, F16, BF16: every matrix in that type. The quantised types below start from their base
 *   type (Q4_K_M → Q4_K, Q5_K_M → Q5_K, Q6_K → Q6_K, Q4_0 → Q4_0, …) and then:
 * - The LM head (output.weight, or token_embd.weight when the embeddings are tied): Q6_K,
 *   except Q8_0 when the file type is Q8_0 or the row is not a whole block of the base type.
 * - Q4_K_M and Q5_K_M only: attn_v.weight and ffn_down.weight of layer i of n get Q6_K when
 *   use_more_bits(i, n): i < n/8, or i ≥ 7n/8, or (i − n/8) % 3 == 2 (integer division).
 * - Fallback when a row is not a multiple of the chosen type's block (256 for K-quants):
 *   Q2_K/Q3_K → Q4_0, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0; if the row is not a multiple of
 *   32 either, F16.
 */
export const MODEL_FILE_TYPES = [
  'f32',
  'f16',
  'bf16',
  'q8_0',
  'q4_0',
  'q4_1',
  'q5_0',
  'q5_1',
  'q4_k_m',
  'q5_k_m',
  'q6_k'
] as const
export type ModelFileType = (typeof MODEL_FILE_TYPES)[number]

/** llama.h's llama_ftype, written to general.file_type. */
export const LLAMA_FTYPE: Readonly<Record<ModelFileType, number>> = {
  f32: 0,
  f16: 1,
  q4_0: 2,
  q4_1: 3,
  q8_0: 7,
  q5_0: 8,
  q5_1: 9,
  q4_k_m: 15,
  q5_k_m: 17,
  q6_k: 18,
  bf16: 32
}

const BASE: Readonly<Record<ModelFileType, WeightDType>> = {
  f32: 'f32',
  f16: 'f16',
  bf16: 'bf16',
  q8_0: 'q8_0',
  q4_0: 'q4_0',
  q4_1: 'q4_1',
  q5_0: 'q5_0',
  q5_1: 'q5_1',
  q4_k_m: 'q4_k',
  q5_k_m: 'q5_k',
  q6_k: 'q6_k'
}

const FALLBACK: Partial<Record<WeightDType, WeightDType>> = {
  q2_k: 'q4_0',
  q3_k: 'q4_0',
  q4_k: 'q5_0',
  q5_k: 'q5_1',
  q6_k: 'q8_0'
}

export function isModelFileType(v: unknown): v is ModelFileType {
  return typeof v === 'string' && (MODEL_FILE_TYPES as readonly string[]).includes(v)
}

/** llama.cpp's use_more_bits: the first and last eighth of the layers and every third between. */
export function useMoreBits(layer: number, nLayers: number): boolean {
  const eighth = Math.floor(nLayers / 8)
  return layer < eighth || layer >= Math.floor((7 * nLayers) / 8) || (layer - eighth) % 3 === 2
}

/** A type whose block fits a row of `cols`, per llama.cpp's tensor_type_fallback. */
export function fitRow(dtype: WeightDType, cols: number): WeightDType {
  if (cols % ggmlTypeOf(dtype).blockElems === 0) return dtype
  const next = FALLBACK[dtype] ?? dtype
  return cols % ggmlTypeOf(next).blockElems === 0 ? next : 'f16'
}

/** The storage type of matrix `name` ([rows, cols] with `cols` per row) in a file of `fileType`. */
export function tensorTypeFor(fileType: ModelFileType, name: TensorName, cols: number, config: ModelConfig): WeightDType {
  if (!isModelFileType(fileType)) throw new InvalidArgumentError(`unknown file type ${String(fileType)}`)
  const base = BASE[fileType]
  if (base === 'f32' || base === 'f16' || base === 'bf16') return base
  let type = base
  const isHead = name === 'output' || (config.tiedEmbeddings && name === 'token_embd')
  if (isHead) {
    type = cols % ggmlTypeOf(base).blockElems !== 0 || base === 'q8_0' ? 'q8_0' : 'q6_k'
  } else if (fileType === 'q4_k_m' || fileType === 'q5_k_m') {
    const m = /^blk\.(\d+)\.(attn_v|ffn_down)$/.exec(name)
    if (m && useMoreBits(Number(m[1]), config.nLayers)) type = 'q6_k'
  }
  return fitRow(type, cols)
}
