// Q6_K block dot product on 512-bit vectors for the 8-row decode kernel (quant-decode.cc), the
// same integer as its 256-bit dotQ6: lanes summing to Σ sc·(q·qx) − 32·Σ sc·Σqx (ggml-common.h
// block_q6_K: ql 128 bytes, qh 64, int8 scales per 16, then d). Every product and sum is an
// exact integer (q ≤ 63 against Q8_K activations |qx| ≤ 127: maddubs pairs ≤ 16002, no
// saturation), so only the lanes differ, not the total reduce8 takes from them.
// Per half n of the block, ql[64n, 64n + 64) = [a | c] and qh[32n, 32n + 32) = h give
//   q0 = a & 15 | (h & 3) << 4          against x[128n,      +32)
//   q1 = c & 15 | (h >> 2 & 3) << 4     against x[128n + 32, +32)
//   q2 = a >> 4 | (h >> 4 & 3) << 4     against x[128n + 64, +32)
//   q3 = c >> 4 | (h >> 6 & 3) << 4     against x[128n + 96, +32)
// so [q0 | q1] and [q2 | q3] each meet 64 contiguous activations, and 128-bit lane j of them
// holds sub-block (of 16) 8n + j, resp. 8n + 4 + j. Half the instructions of the 256-bit form.
#pragma once
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>

#include <cstdint>

#define LS_Q6_AVX512 1

namespace ls {

inline __m256i dotQ6Wide(const uint8_t* blk, const int8_t* x, __m256i bs16) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(3);
  const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
  const __m512i s = _mm512_castsi256_si512(s16);
  // Word shifts of [h | h] for q0/q1 and q2/q3; the masks keep bits within each byte.
  const __m512i sh01 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
  const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  __m512i acc = _mm512_setzero_si512();
  for (int n = 0; n < 2; n++) {
    const __m512i a = _mm512_loadu_si512(blk + 64 * n);
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * n)));
    const __m512i q01 = _mm512_or_si512(_mm512_and_si512(a, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh01), m2), 4));
    const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m4),
                                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh23), m2), 4));
    // Scale of sub-block 8n + j (resp. 8n + 4 + j) in every word of 128-bit lane j.
    const short b0 = short(8 * n), b1 = short(8 * n + 4);
    const __m512i idx01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(short(b0 + 1)), _mm_set1_epi16(b0))),
                                             _mm256_set_m128i(_mm_set1_epi16(short(b0 + 3)), _mm_set1_epi16(short(b0 + 2))), 1);
    const __m512i idx23 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(short(b1 + 1)), _mm_set1_epi16(b1))),
                                             _mm256_set_m128i(_mm_set1_epi16(short(b1 + 3)), _mm_set1_epi16(short(b1 + 2))), 1);
    acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q01, _mm512_loadu_si512(x + 128 * n)), _mm512_permutexvar_epi16(idx01, s));
    acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q23, _mm512_loadu_si512(x + 128 * n + 64)), _mm512_permutexvar_epi16(idx23, s));
  }
  const __m256i folded = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
  return _mm256_sub_epi32(folded, _mm256_slli_epi32(_mm256_madd_epi16(s16, bs16), 5));
}

}  // namespace ls
#endif
