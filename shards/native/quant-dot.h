// Matmuls on GGUF block types beyond Q8_0 (quant-dot.cc): Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K and BF16, with the arithmetic of shards/kernels-ref-exact-quant.ts.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ls {

// ggml_type ids (ggml.h), the type codes of op 8 (shards/kernels-wasm/layout.ts OP_MATMUL_QUANT).
constexpr int kTypeQ4_0 = 2, kTypeQ4_1 = 3, kTypeQ5_0 = 6, kTypeQ5_1 = 7;
constexpr int kTypeQ2_K = 10, kTypeQ3_K = 11, kTypeQ4_K = 12, kTypeQ5_K = 13, kTypeQ6_K = 14, kTypeBF16 = 30;

/** Whether this build multiplies `type` (AVX2 builds take all of the above). */
bool quantAvailable(int type);
/** Bytes of one row of `cols` elements, 0 for an unknown type or a partial block. */
size_t quantRowBytes(int type, int cols);
/**
 * Quantise (or, for BF16, regroup) activations x[T, cols] into this thread's buffers: Q8_0
 * blocks for the legacy types, Q8_K super-blocks for the K-quants, as llama.cpp does.
 */
void quantPrepare(int type, const float* x, int cols, int T);
/**
 * Rows [r0, r1) of out[T, rows] = x · wᵀ from the activations this thread prepared. `type` may
 * carry kRows8 (quant-layout.h) for a repacked Q4_K/Q5_K/Q6_K matrix of wRows rows (out's row
 * stride `rows` may be wider: a matrix written into part of a wider output).
 */
void quantRows(int type, const uint8_t* w, const float* x, float* out, int rows, int cols, int T, int r0, int r1, int wRows);

}  // namespace ls
