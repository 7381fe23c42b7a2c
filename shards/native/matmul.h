// Native matmul kernels (see matmul.cc). Same arithmetic as the WebAssembly kernels in
// shards/asm/ (the canonical orders are documented there and in shards/kernels-ref-exact.ts),
// so either engine gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ls {

/** Rows [r0, r1) of out[T, rows] = x[T, cols] · wᵀ, w f32 (f16 when `half`). */
void matmulF(const uint8_t* w, bool half, const float* x, float* out, int rows, int cols, int T, int r0, int r1);

/** Rows [r0, r1) for Q8_0 weights; xq/xd are the wasm quantizeQ8 output (i16 quants, f32 scales). */
void matmulQ8(const uint8_t* w, const int16_t* xq, const float* xd, float* out, int rows, int cols, int T, int r0, int r1);

/** Instruction set the integer path was compiled for. */
const char* isa();

}  // namespace ls
