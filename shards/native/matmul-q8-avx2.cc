// Batched Q8_0 matmul for AVX2 builds without AVX512-VNNI (issue 40: prefill, verification and
// node batches on the CPUs most people own), the canonical arithmetic of matmul.cc: per (row,
// token, block) the exact integer sum, then sumf = sumf + f32(isum)·(dw·dx) in block order.
// 8 tokens per 256-bit vector, no horizontal sums: activations are regrouped as
// xg[group][block][4-byte group j][8 tokens][4] (matmul.cc's VNNI layout at half the width), so
// one vector holds quants 4j..4j+3 of 8 tokens. A weight group of 4 is broadcast; the sign
// trick (|w| as the u8 operand of maddubs, x with w's sign as the s8 one: pairs ≤ 2·128·127 <
// 2^15, no saturation, since |x| ≤ 127 from quantizeQ8) and madd with ones give each token's
// i32 partial sum, which add up exactly in any order. Four rows share each activation load.
// Built with -ffp-contract=off (build.mjs): no FMA, each float product and sum rounds alone.
#include <cstring>
#include <vector>

#include "half-exact.h"
#include "matmul.h"
#if defined(__AVX2__) && !(defined(__AVX512VNNI__) && defined(__AVX512BW__))
#include <immintrin.h>

namespace ls {

namespace {
thread_local std::vector<int8_t> tlXg;  // [group][block][j][8 tokens][4]
thread_local std::vector<float> tlDx;   // [group][block][8 tokens]

inline float halfBits(const uint8_t* p) { return halfBitsToFloat(p); }

inline __m256i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
}  // namespace

void matmulQ8PrepareAvx2(const int8_t* xs, const int16_t* xq, const float* xd, int cols, int T) {
  const int nb = cols / 32, groups = (T + 7) / 8;
  tlXg.assign(size_t(groups) * nb * 256, 0);
  tlDx.assign(size_t(groups) * nb * 8, 0.0f);
  for (int t = 0; t < T; t++) {
    int8_t* g = tlXg.data() + size_t(t / 8) * nb * 256 + (t % 8) * 4;
    for (int b = 0; b < nb; b++) {
      for (int j = 0; j < 8; j++) {
        int8_t* d = g + size_t(b) * 256 + j * 32;
        const size_t at = size_t(t) * cols + b * 32 + j * 4;
        for (int e = 0; e < 4; e++) d[e] = xs ? xs[at + e] : int8_t(xq[at + e]);
      }
      tlDx[(size_t(t / 8) * nb + b) * 8 + t % 8] = xd[size_t(t) * nb + b];
    }
  }
}

void matmulQ8RowsAvx2(const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1) {
  constexpr int kRows = 4;   // rows per pass (sharing each activation load)
  constexpr int kChunk = 32; // rows whose weights stay in L2 while every token group passes
  const int nb = cols / 32, groups = (T + 7) / 8;
  const size_t rb = size_t(nb) * 34;
  const __m256i ones = _mm256_set1_epi16(1);
  // Per chunk row: |w| (the u8 operand) and dw, unpacked once for all token groups.
  std::vector<uint8_t> absW(size_t(kChunk) * nb * 32);
  std::vector<float> dw(size_t(kChunk) * nb);
  for (int rc = r0; rc < r1; rc += kChunk) {
    const int rn = r1 - rc < kChunk ? r1 - rc : kChunk;
    for (int i = 0; i < rn; i++) {
      const uint8_t* row = w + size_t(rc + i) * rb;
      for (int b = 0; b < nb; b++) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * 34 + 2));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(absW.data() + (size_t(i) * nb + b) * 32), _mm256_sign_epi8(v, v));
        dw[size_t(i) * nb + b] = halfBits(row + b * 34);
      }
    }
    for (int g = 0; g < groups; g++) {
      const int8_t* xg = tlXg.data() + size_t(g) * nb * 256;
      const float* dg = tlDx.data() + size_t(g) * nb * 8;
      for (int i0 = 0; i0 < rn; i0 += kRows) {
        const int nr = rn - i0 < kRows ? rn - i0 : kRows;
        // Rows past the chunk repeat its last row (results dropped): loads stay in bounds.
        const uint8_t* wq[kRows];
        const uint8_t* wa[kRows];
        const float* wd[kRows];
        for (int k = 0; k < kRows; k++) {
          const int i = i0 + (k < nr ? k : nr - 1);
          wq[k] = w + size_t(rc + i) * rb + 2;
          wa[k] = absW.data() + size_t(i) * nb * 32;
          wd[k] = dw.data() + size_t(i) * nb;
        }
        __m256 acc[kRows];
        for (int k = 0; k < kRows; k++) acc[k] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
          const int8_t* xb = xg + size_t(b) * 256;
          __m256i s[kRows];
          for (int k = 0; k < kRows; k++) s[k] = _mm256_setzero_si256();
          for (int j = 0; j < 8; j++) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + j * 32));
            for (int k = 0; k < kRows; k++) {
              const __m256i sx = _mm256_sign_epi8(x, bcast4(wq[k] + size_t(b) * 34 + 4 * j));
              s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(_mm256_maddubs_epi16(bcast4(wa[k] + size_t(b) * 32 + 4 * j), sx), ones));
            }
          }
          const __m256 dx = _mm256_loadu_ps(dg + size_t(b) * 8);
          for (int k = 0; k < kRows; k++)
            acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(_mm256_cvtepi32_ps(s[k]), _mm256_mul_ps(_mm256_set1_ps(wd[k][b]), dx)));
        }
        for (int k = 0; k < nr; k++) {
          alignas(32) float lanes[8];
          _mm256_store_ps(lanes, acc[k]);
          for (int tt = 0; tt < 8 && g * 8 + tt < T; tt++) out[size_t(g * 8 + tt) * rows + rc + i0 + k] = lanes[tt];
        }
      }
    }
  }
}

}  // namespace ls
#endif
