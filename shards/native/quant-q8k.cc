// Q8_K activations for the K-quant kernels (quant-dot.cc quantPrepare).
// Built with -ffp-contract=off (build.mjs): no FMA, each float product and sum rounds alone.
#include <cstdint>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "quant-internal.h"

namespace ls {

#if defined(__AVX2__)
// ggml quantize_row_q8_K_ref, 8 lanes at a time with the same float operations: amax over |x|
// (NaN never compares greater, so vector max keeps the running value over a NaN, as the scalar
// loop skips it), the first element of largest magnitude gives the sign, q = min(127,
// nearest_int(iscale·x)) with ggml's nearest_int (the 1.5·2^23 trick: ties to even, bit for bit).
void quantizeRowQ8K(const float* x, int8_t* qs, float* d, int32_t* bsums, int cols) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int b = 0; b < cols / 256; b++) {
    const float* src = x + b * 256;
    __m256 vmax = _mm256_setzero_ps();
    for (int j = 0; j < 256; j += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(src + j), absMask), vmax);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float amax = _mm_cvtss_f32(m4);
    int8_t* q = qs + b * 256;
    if (amax == 0) {
      std::memset(q, 0, 256);
      d[b] = 0;
      for (int s = 0; s < 16; s++) bsums[b * 16 + s] = 0;
      continue;
    }
    // The first element whose magnitude is amax (8 at a time; there is one, amax came from it).
    float max = 0;
    const __m256 va = _mm256_set1_ps(amax);
    for (int j = 0; j < 256; j += 8) {
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(src + j), absMask), va, _CMP_EQ_OQ));
      if (hit) {
        max = src[j + __builtin_ctz(unsigned(hit))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vs = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.f);
    for (int j = 0; j < 256; j += 32) {
      __m256i v[4];
      for (int i = 0; i < 4; i++) {
        const __m256i bits = _mm256_castps_si256(_mm256_add_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(src + j + 8 * i)), magic));
        v[i] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000)),
                                _mm256_set1_epi32(127));
      }
      // packs interleave 128-bit halves: lanes come out as 0 4 1 5 2 6 3 7 in dwords; undo it.
      const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      const __m256i qv = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), qv);
      // Σq per 16: the two halves of the 32 just stored.
      const __m256i w = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), qv), _mm256_set1_epi16(1));
      const __m256i hw = _mm256_hadd_epi32(w, w);
      const __m128i h = _mm256_castsi256_si128(hw), hh = _mm256_extracti128_si256(hw, 1);
      bsums[b * 16 + j / 16] = _mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 1);
      bsums[b * 16 + j / 16 + 1] = _mm_cvtsi128_si32(hh) + _mm_extract_epi32(hh, 1);
    }
    d[b] = 1 / iscale;
  }
}
#endif

}  // namespace ls
