import { QUANT_LAYOUTS, type QuantDType } from '../quant-blocks.js'
import type { WeightDType } from '../types.js'

/**
 * Every GGUF tensor type the engine reads, with its ggml_type id (ggml.h), elements per block
 * and bytes per block: F32, F16, Q8_0 here and the other block types from QUANT_LAYOUTS
 * (shards/quant-blocks.ts), so ids and sizes are written down once.
 */
export interface GgmlType {
  readonly dtype: WeightDType
  /** ggml's spelling, as llama.cpp prints it (e.g. "Q4_K"). */
  readonly name: string
  readonly id: number
  readonly blockElems: number
  readonly blockBytes: number
}

export const GGML_TYPE_TABLE: readonly GgmlType[] = ([] as GgmlType[])
  .concat(
    [
      { dtype: 'f32', name: 'F32', id: 0, blockElems: 1, blockBytes: 4 },
      { dtype: 'f16', name: 'F16', id: 1, blockElems: 1, blockBytes: 2 },
      { dtype: 'q8_0', name: 'Q8_0', id: 8, blockElems: 32, blockBytes: 34 }
    ],
    (Object.entries(QUANT_LAYOUTS) as Array<[QuantDType, (typeof QUANT_LAYOUTS)[QuantDType]]>).map(([dtype, l]) => ({
      dtype,
      name: dtype.toUpperCase(),
      id: l.ggmlType,
      blockElems: l.blockElems,
      blockBytes: l.blockBytes
    }))
  )
  .sort((a: GgmlType, b: GgmlType) => a.id - b.id)

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
