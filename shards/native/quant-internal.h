// Shared between quant-dot.cc (activations, decode-sized dot products) and quant-batch.cc
// (batched rows): this thread's quantised activations.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant-layout.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ls {

/** Activations: int8 quants [T, cols], one scale per block, Σq per block (Q8_0) or per 16 (Q8_K). */
struct QuantActs {
  std::vector<int8_t> xs;
  std::vector<float> xd;
  std::vector<int32_t> xsum;
  std::vector<int16_t> bsum16;  // Q8_K only: Σq per 16 as i16 (|Σ| ≤ 16·127), for the decode kernels
};

/**
 * Rows [r0, r1) of out[T, rows] for Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K with T below
 * kBatchedFrom, 8 rows per pass (quant-decode.cc); false for other types (and builds without AVX2).
 * K types may carry kRows8 (quant-layout.h); wRows is the matrix's own row count (its layout).
 */
bool quantDecode8(int type, const uint8_t* w, int wRows, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1);

#if defined(__AVX2__)
/** ggml quantize_row_q8_K_ref of one row (quant-q8k.cc): int8 quants, f32 scale and Σq per 16 per 256. */
void quantizeRowQ8K(const float* x, int8_t* qs, float* d, int32_t* bsums, int cols);
#endif

/** Regroup this thread's activations for quantRowsBatched (called by quantPrepare, T >= 8). */
void quantBatchPrepare(bool kQuant, const QuantActs& a, int cols, int T);
/** Whether quantRowsBatched runs here (AVX512-VNNI builds: quant-batch.cc; AVX2: quant-batch-avx2.cc). */
bool quantBatchAvailable();
/**
 * Rows [r0, r1) of out[T, rows] from the prepared activations `a` (AVX512-VNNI: from their
 * regrouped copy, 16 tokens per vector; AVX2: 8 tokens per vector).
 */
void quantRowsBatched(int type, const uint8_t* w, int wRows, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1);

#if defined(__AVX2__)
// The block's 32 quants as u8 (0..31, before the offset): low nibbles are elements 0..15, high
// nibbles 16..31; Q5's 32-bit qh gives bit 4 of element j from bit j.
template <int QsAt, bool Five>
inline __m256i unpackLegacy(const uint8_t* blk) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + QsAt));
  __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
  if (Five) {
    uint32_t qh;
    std::memcpy(&qh, blk + QsAt - 4, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)),
                                               _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
  }
  return q;
}
#endif

}  // namespace ls
