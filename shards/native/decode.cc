// Single-token (decode) and small-batch (T < 8) matmuls, the memory-bound case: every weight
// byte is read once per token, so these kernels only need to keep up with DRAM. Same
// canonical arithmetic as the WebAssembly kernels (shards/asm/matmul-q8.ts, matmul-f.ts) and
// shards/kernels-ref-exact.ts, so results are bit-identical to them:
// - Q8_0: exact integer block sums (any order is exact), then per row
//   sumf = sumf + f32(isum) * (dw * dx) over blocks in order (ggml_vec_dot_q8_0_q8_0's C path);
//   vectorized across 8 rows, never within one row's float chain. Integer dot products use
//   ggml's AVX2 trick (|w| as u8 times sign-transferred x) with VNNI vpdpbusd where available.
// - f32: per row 4 lane accumulators over k in steps of 4, then (l0 + l1) + (l2 + l3), then the
//   k % 4 tail; vectorized as 4 rows × 4 lanes per 512-bit register.
// Built with -ffp-contract=off (build.mjs): no FMA, every product and sum rounds separately.
#include "matmul.h"

#include <cstring>
#include <vector>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ls {

#if defined(__AVX2__)
static thread_local std::vector<int8_t> tlXs;
static thread_local std::vector<int32_t> tlXsum;

// Σ (w + 128)·x over 32 pairs as 8 i32 partial sums: the weight bytes with their sign bit
// flipped are w + 128 as u8, the VNNI/maddubs unsigned operand; the caller subtracts 128·Σx.
// Exact: (w + 128) ≤ 255 and |x| ≤ 127 (maddubs pairs stay below 2·255·127 < 2^16 only as
// u8·s8 products summed in i16 saturating, so the AVX2 path keeps ggml's sign trick instead).
static inline __m256i dot32(__m256i w, __m256i x) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_xor_si256(w, _mm256_set1_epi8(char(0x80))), x);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_xor_si256(w, _mm256_set1_epi8(char(0x80))), x);
#else
  // ggml's AVX2 trick: |w| as u8 times sign-transferred x; pairs ≤ 2·128·127 < 2^15, exact.
  const __m256i u = _mm256_sign_epi8(w, w);
  const __m256i s = _mm256_sign_epi8(x, w);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
static constexpr int kBias = 128;
#else
static constexpr int kBias = 0;
#endif

// Lane i = horizontal sum of p[i] (integer, exact in any order).
static inline __m256i reduce8(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// IEEE half bit patterns (low 16 bits of each lane) to f32 exactly as shards/asm/common.ts
// halfToFloat4 (shift and multiply by 2^112), not F16C, so inf/NaN scales map the same way too.
static inline __m256 half8(__m256i h) {
  const __m256i em = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7fff)), 13);
  const __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(em), _mm256_set1_ps(5.192296858534828e33f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
  return _mm256_or_ps(f, _mm256_castsi256_ps(sign));
}

void decodeQ8(const uint8_t* w, const int16_t* xq, const float* xd, float* out, int rows, int cols, int T, int r0, int r1) {
  const int nb = cols / 32;
  tlXs.resize(size_t(T) * cols);
  tlXsum.resize(size_t(T) * nb);
  for (size_t i = 0; i < size_t(T) * cols; i++) tlXs[i] = int8_t(xq[i]);
  for (size_t j = 0; j < size_t(T) * nb; j++) {
    int s = 0;
    for (int i = 0; i < 32; i++) s += tlXs[j * 32 + i];
    tlXsum[j] = kBias * s;
  }
  decodeQ8Prepared(w, tlXs.data(), tlXsum.data(), xd, out, rows, cols, T, r0, r1);
}

int decodeQ8Bias() { return kBias; }

void decodeQ8Prepared(const uint8_t* w, const int8_t* xsAll, const int32_t* xsumAll, const float* xd, float* out, int rows, int cols, int T, int r0, int r1) {
  const int nb = cols / 32;
  const size_t rb = size_t(nb) * 34;
  for (int r = r0; r < r1; r += 8) {
    const int nr = r1 - r < 8 ? r1 - r : 8;
    // Rows past the chunk repeat row r (results dropped), so every load stays in bounds.
    const uint8_t* wr[8];
    int offs[8];
    for (int i = 0; i < 8; i++) {
      wr[i] = w + size_t(r + (i < nr ? i : 0)) * rb;
      offs[i] = int((i < nr ? i : 0) * rb);
    }
    const __m256i scaleIdx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offs));
    for (int t = 0; t < T; t++) {
      const int8_t* xs = xsAll + size_t(t) * cols;
      const float* dx = xd + size_t(t) * nb;
      const int32_t* bias = xsumAll + size_t(t) * nb;
      __m256 acc = _mm256_setzero_ps();
      // The 8 rows of a tile are contiguous (8·rb bytes) and the next tiles follow: stream the
      // one two tiles ahead in while this one is computed (the 8 interleaved rows defeat the
      // hardware prefetcher; two tiles ahead measured a few % faster than one here).
      const char* pf = reinterpret_cast<const char*>(w + size_t(r + 16) * rb);
      for (int b = 0; b < nb; b++) {
        if (t == 0) {
          const char* p0 = pf + size_t(b) * 272;
          _mm_prefetch(p0, _MM_HINT_T0);
          _mm_prefetch(p0 + 64, _MM_HINT_T0);
          _mm_prefetch(p0 + 128, _MM_HINT_T0);
          _mm_prefetch(p0 + 192, _MM_HINT_T0);
          _mm_prefetch(p0 + 256, _MM_HINT_T0);
        }
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + b * 32));
        __m256i p[8];
        for (int i = 0; i < 8; i++)
          p[i] = dot32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[i] + size_t(b) * 34 + 2)), xv);
        const __m256 isum = _mm256_cvtepi32_ps(_mm256_sub_epi32(reduce8(p), _mm256_set1_epi32(bias[b])));
        const __m256i h = _mm256_i32gather_epi32(reinterpret_cast<const int*>(wr[0] + size_t(b) * 34), scaleIdx, 1);
        const __m256 d = _mm256_mul_ps(half8(h), _mm256_set1_ps(dx[b]));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(isum, d));
      }
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc);
      for (int i = 0; i < nr; i++) out[size_t(t) * rows + r + i] = lanes[i];
    }
  }
}
#elif !(defined(__ARM_NEON) && defined(__aarch64__))  // Arm: neon-q8.cc
void decodeQ8(const uint8_t*, const int16_t*, const float*, float*, int, int, int, int, int) {}
void decodeQ8Prepared(const uint8_t*, const int8_t*, const int32_t*, const float*, float*, int, int, int, int, int) {}
int decodeQ8Bias() { return 0; }
#endif

#if defined(__AVX512F__)
// 4 rows × 4 k-lanes per register; 16 rows (4 registers) per tile so the four add chains
// overlap their latency. Rows are read 64 bytes at a time (16 k of one row) and the 4 × 4
// blocks of 128 bits transposed, so register g holds k..k+3 of rows 4g..4g+3, then k+4..k+7,
// ...: the same per-lane order as 128-bit loads, with full-line loads (measured ~93 % of a
// streaming read on one thread, against ~70 % for 4-float loads with software prefetch).
static inline __m512 load4rows(const float* w0, const float* w1, const float* w2, const float* w3) {
  __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(w0));
  v = _mm512_insertf32x4(v, _mm_loadu_ps(w1), 1);
  v = _mm512_insertf32x4(v, _mm_loadu_ps(w2), 2);
  return _mm512_insertf32x4(v, _mm_loadu_ps(w3), 3);
}

void decodeF32(const float* w, const float* x, float* out, int rows, int cols, int T, int r0, int r1) {
  const int n16 = cols & ~15, n4 = cols & ~3;
  for (int r = r0; r < r1; r += 16) {
    const int nr = r1 - r < 16 ? r1 - r : 16;
    const float* wr[16];
    for (int i = 0; i < 16; i++) wr[i] = w + size_t(r + (i < nr ? i : 0)) * cols;
    for (int t = 0; t < T; t++) {
      const float* xt = x + size_t(t) * cols;
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      int k = 0;
      for (; k < n16; k += 16) {
        const __m512 x0 = _mm512_broadcast_f32x4(_mm_loadu_ps(xt + k));
        const __m512 x1 = _mm512_broadcast_f32x4(_mm_loadu_ps(xt + k + 4));
        const __m512 x2 = _mm512_broadcast_f32x4(_mm_loadu_ps(xt + k + 8));
        const __m512 x3 = _mm512_broadcast_f32x4(_mm_loadu_ps(xt + k + 12));
        for (int g = 0; g < 4; g++) {
          const __m512 a = _mm512_loadu_ps(wr[4 * g] + k), b = _mm512_loadu_ps(wr[4 * g + 1] + k);
          const __m512 c = _mm512_loadu_ps(wr[4 * g + 2] + k), d = _mm512_loadu_ps(wr[4 * g + 3] + k);
          const __m512 u0 = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0));
          const __m512 u1 = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2));
          const __m512 u2 = _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0));
          const __m512 u3 = _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2));
          acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(2, 0, 2, 0)), x0));
          acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(3, 1, 3, 1)), x1));
          acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(2, 0, 2, 0)), x2));
          acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(3, 1, 3, 1)), x3));
        }
      }
      for (; k < n4; k += 4) {
        const __m512 xv = _mm512_broadcast_f32x4(_mm_loadu_ps(xt + k));
        for (int g = 0; g < 4; g++)
          acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(load4rows(wr[4 * g] + k, wr[4 * g + 1] + k, wr[4 * g + 2] + k, wr[4 * g + 3] + k), xv));
      }
      alignas(64) float lanes[64];
      for (int g = 0; g < 4; g++) _mm512_store_ps(lanes + 16 * g, acc[g]);
      for (int i = 0; i < nr; i++) {
        const float* a = lanes + 4 * i;
        float s = (a[0] + a[1]) + (a[2] + a[3]);
        for (int kk = n4; kk < cols; kk++) s = s + wr[i][kk] * xt[kk];
        out[size_t(t) * rows + r + i] = s;
      }
    }
  }
}
#else
void decodeF32(const float*, const float*, float*, int, int, int, int, int) {}
#endif

bool decodeAvailable(bool q8) {
#if defined(__AVX512F__)
  return true;
#elif defined(__AVX2__) || (defined(__ARM_NEON) && defined(__aarch64__))
  return q8;
#else
  (void)q8;
  return false;
#endif
}

}  // namespace ls
