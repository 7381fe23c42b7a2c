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

/**
 * The same two matmuls split in two: Prepare regroups the activations into this thread's
 * buffers once, Rows then computes any number of row ranges from them (the fused block calls
 * Rows per share). For Q8_0, xs are int8 quants (nullptr: keep the i16 ones already held).
 */
void matmulFPrepare(const float* x, int cols, int T);
void matmulFRows(const uint8_t* w, bool half, const float* x, float* out, int rows, int cols, int T, int r0, int r1);
void matmulQ8Prepare(const int8_t* xs, const float* xd, int cols, int T);
void matmulQ8Rows(const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1);

/** The AVX2 forms of matmulQ8Prepare / matmulQ8Rows (matmul-q8-avx2.cc; xq: i16 quants when xs is null). */
void matmulQ8PrepareAvx2(const int8_t* xs, const int16_t* xq, const float* xd, int cols, int T);
void matmulQ8RowsAvx2(const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1);

/** The Arm NEON forms (neon-q8.cc), likewise. */
void matmulQ8PrepareNeon(const int8_t* xs, const int16_t* xq, const float* xd, int cols, int T);
void matmulQ8RowsNeon(const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1);

/** Rows [r0, r1) of a T < 8 matmul (decode.cc); only where decodeAvailable(q8). */
void decodeQ8(const uint8_t* w, const int16_t* xq, const float* xd, float* out, int rows, int cols, int T, int r0, int r1);
/** decodeQ8 on activations already narrowed to int8, with Σq per block × decodeQ8Bias() given. */
void decodeQ8Prepared(const uint8_t* w, const int8_t* xs, const int32_t* xsumBias, const float* xd, float* out, int rows, int cols, int T, int r0, int r1);
int decodeQ8Bias();
void decodeF32(const float* w, const float* x, float* out, int rows, int cols, int T, int r0, int r1);
/** Whether this build has a decode kernel for Q8_0 (q8) or f32 weights. */
bool decodeAvailable(bool q8);

/** Instruction set the integer path was compiled for. */
const char* isa();

}  // namespace ls
