// The GGUF block types beyond F32/F16/Q8_0 (quant-blocks.ts says more), as a leaf: shards/types.ts
// names them in WeightDType, and the type table (ggml-types.ts) names WeightDType, so the list
// lives where neither imports the other back (issue 36: no cycles).

export const QUANT_DTYPES = ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'bf16'] as const
export type QuantDType = (typeof QUANT_DTYPES)[number]
