import type { WeightDType } from '../types.js'

/**
 * Every GGUF tensor type the engine reads, with its ggml_type id (ggml.h), elements and bytes
 * per block (ggml-common.h) and how the fast kernels' dot products quantise activations for it
 * (as llama.cpp's CPU backend does: Q8_0 blocks of 32 for Q8_0 and the legacy types, Q8_K
 * super-blocks of 256 for the K-quants; F32, F16 and BF16 multiply f32 activations). The one
 * table of block types: shards/quant/quant-blocks.ts QUANT_LAYOUTS is read from it.
 */
export interface GgmlType {
  readonly dtype: WeightDType
  /** ggml's spelling, as llama.cpp prints it (e.g. "Q4_K"). */
  readonly name: string
  readonly id: number
  readonly blockElems: number
  readonly blockBytes: number
  readonly activations: 'f32' | 'q8_0' | 'q8_k'
}

const type = (
  dtype: WeightDType,
  id: number,
  blockElems: number,
  blockBytes: number,
  activations: GgmlType['activations']
): GgmlType => ({
  dtype,
  name: dtype.toUpperCase(),
  id,
  blockElems,
  blockBytes,
  activations
})

/** In ggml_type id order. */
export const GGML_TYPE_TABLE: readonly GgmlType[] = [
  type('f32', 0, 1, 4, 'f32'),
  type('f16', 1, 1, 2, 'f32'),
  type('q4_0', 2, 32, 18, 'q8_0'),
  type('q4_1', 3, 32, 20, 'q8_0'),
  type('q5_0', 6, 32, 22, 'q8_0'),
  type('q5_1', 7, 32, 24, 'q8_0'),
  type('q8_0', 8, 32, 34, 'q8_0'),
  type('q2_k', 10, 256, 84, 'q8_k'),
  type('q3_k', 11, 256, 110, 'q8_k'),
  type('q4_k', 12, 256, 144, 'q8_k'),
  type('q5_k', 13, 256, 176, 'q8_k'),
  type('q6_k', 14, 256, 210, 'q8_k'),
  type('bf16', 30, 1, 2, 'f32')
]

const BY_DTYPE = new Map(GGML_TYPE_TABLE.map((t) => [t.dtype, t]))
const BY_ID = new Map(GGML_TYPE_TABLE.map((t) => [t.id, t]))

/**
 * Names of the ggml_type ids the engine knows of but cannot run (ggml.h enum ggml_type; ids
 * 4, 5, 31-33 and 36-38 belonged to types since removed from ggml). Any id not here and not in
 * GGML_TYPE_TABLE is unknown.
 */
const UNSUPPORTED_NAMES: Readonly<Record<number, string>> = {
  4: 'Q4_2',
  5: 'Q4_3',
  9: 'Q8_1',
  15: 'Q8_K',
  16: 'IQ2_XXS',
  17: 'IQ2_XS',
  18: 'IQ3_XXS',
  19: 'IQ1_S',
  20: 'IQ4_NL',
  21: 'IQ3_S',
  22: 'IQ2_S',
  23: 'IQ4_XS',
  24: 'I8',
  25: 'I16',
  26: 'I32',
  27: 'I64',
  28: 'F64',
  29: 'IQ1_M',
  31: 'Q4_0_4_4',
  32: 'Q4_0_4_8',
  33: 'Q4_0_8_8',
  34: 'TQ1_0',
  35: 'TQ2_0',
  36: 'IQ4_NL_4_4',
  37: 'IQ4_NL_4_8',
  38: 'IQ4_NL_8_8',
  39: 'MXFP4'
}

export function ggmlTypeOf(dtype: WeightDType): GgmlType {
  const t = BY_DTYPE.get(dtype)
  if (!t) throw new RangeError(`no ggml type for dtype ${String(dtype)}`)
  return t
}

/** The type of a ggml_type id, or undefined when the engine does not run it. */
export function ggmlTypeById(id: number): GgmlType | undefined {
  return BY_ID.get(id)
}

/** ggml's name of a type id whether or not the engine runs it; undefined for an unknown id. */
export function ggmlTypeName(id: number): string | undefined {
  return BY_ID.get(id)?.name ?? UNSUPPORTED_NAMES[id]
}

/** The names of the supported types, for error messages ("F32, F16, BF16, Q4_0, …"). */
export function supportedTypeNames(): string {
  return GGML_TYPE_TABLE.map((t) => t.name).join(', ')
}
