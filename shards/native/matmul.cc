// Batched matmul for prefill and draft verification. Built on the machine that runs it
// (-march=native, see build.mjs) with -ffp-contract=off: no FMA, so every float operation
// rounds exactly like the WebAssembly kernels. Vectorization only ever runs several
// independent canonical accumulators side by side (different tokens), never reorders one.
#include "matmul.h"

#include <cstring>
#include <vector>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define LS_VNNI 1
#elif defined(__AVX2__)
#define LS_AVX2Q8 1
#elif defined(__ARM_NEON) && defined(__aarch64__)
#define LS_NEONQ8 1  // neon-q8.cc
#endif

namespace ls {

typedef float f4 __attribute__((vector_size(16)));
typedef float f16v __attribute__((vector_size(64)));

static inline float halfToFloat(uint16_t h) {
  // Same exact shift-and-multiply conversion as shards/asm/common.ts halfToFloat.
  uint32_t em = uint32_t(h & 0x7fff) << 13;
  float f;
  std::memcpy(&f, &em, 4);
  f *= 5.192296858534828e33f;  // 2^112
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= uint32_t(h & 0x8000) << 16;
  std::memcpy(&f, &bits, 4);
  return f;
}

const char* isa() {
#ifdef LS_VNNI
  return "avx512vnni";
#elif defined(LS_AVX2Q8)
  return "avx2";
#elif defined(LS_NEONQ8) && defined(__ARM_FEATURE_DOTPROD)
  return "neon-dotprod";
#elif defined(LS_NEONQ8)
  return "neon";
#else
  return "generic";
#endif
}

// ---- f32 / f16 ---------------------------------------------------------------------------
// Activations are regrouped as xg[group][k/4][4 tokens][4 lanes] (zero padded) so one
// 16-float vector carries lane l of token t for 4 tokens; a weight chunk w[k..k+4] is
// broadcast to all four. Lane (t, l) is then exactly the wasm accumulator lane l of token t.
// Tiles: 4 rows × 4 groups (16 tokens), 16 vector accumulators.

static thread_local std::vector<float> tlX;
static thread_local std::vector<float> tlW;

static inline f16v bcast(const float* p) {
#ifdef __AVX512F__
  // A register broadcast: the generic shuffle below goes through the stack on GCC 12 and
  // stalls on store forwarding.
  return (f16v)_mm512_broadcast_f32x4(_mm_loadu_ps(p));
#endif
  f4 w4;
  std::memcpy(&w4, p, 16);
  return __builtin_shufflevector(w4, w4, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
}

void matmulF(const uint8_t* w, bool half, const float* x, float* out, int rows, int cols, int T, int r0, int r1) {
  matmulFPrepare(x, cols, T);
  matmulFRows(w, half, x, out, rows, cols, T, r0, r1);
}

void matmulFPrepare(const float* x, int cols, int T) {
  const int n4 = cols & ~3;
  const int groups = (T + 3) / 4;
  const size_t gstride = size_t(n4) * 4;  // floats per 4-token group
  tlX.assign(size_t(groups + 3) * gstride, 0.0f);
  for (int t = 0; t < T; t++) {
    float* g = tlX.data() + size_t(t / 4) * gstride + (t % 4) * 4;
    for (int k = 0; k < n4; k += 4) std::memcpy(g + size_t(k) * 4, x + size_t(t) * cols + k, 16);
  }
}

void matmulFRows(const uint8_t* w, bool half, const float* x, float* out, int rows, int cols, int T, int r0, int r1) {
  const int n4 = cols & ~3;
  const int groups = (T + 3) / 4;
  const size_t gstride = size_t(n4) * 4;
  tlW.resize(size_t(cols) * 4);
  for (int r = r0; r < r1; r += 4) {
    const int nr = r1 - r < 4 ? r1 - r : 4;
    float* wf = tlW.data();
    for (int i = 0; i < nr; i++) {
      const uint8_t* row = w + size_t(r + i) * cols * (half ? 2 : 4);
      if (half) {
        for (int k = 0; k < cols; k++) {
          uint16_t h;
          std::memcpy(&h, row + 2 * k, 2);
          wf[size_t(i) * cols + k] = halfToFloat(h);
        }
      } else {
        std::memcpy(wf + size_t(i) * cols, row, size_t(cols) * 4);
      }
    }
    for (int i = nr; i < 4; i++) std::memset(wf + size_t(i) * cols, 0, size_t(cols) * 4);
#if defined(__AVX2__) && !defined(__AVX512F__)
    // AVX2 (issue 40): a 256-bit vector is lanes 0..3 of two tokens; 2 rows × 8 tokens per pass
    // (8 accumulators), the same per-lane chains as below. GCC's 64-byte generic vectors
    // measured 8x slower than WebAssembly here (their broadcast goes through the stack).
    for (int i0 = 0; i0 < 4; i0 += 2) {
      if (i0 >= nr) break;
      const float* wa = wf + size_t(i0) * cols;
      const float* wb = wa + cols;
      for (int g0 = 0; g0 < groups; g0 += 2) {
        const float* xa = tlX.data() + size_t(g0) * gstride;
        const float* xb = xa + gstride;  // zero padded: tlX holds 3 spare groups
        __m256 a[2][4];
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 4; j++) a[i][j] = _mm256_setzero_ps();
        for (int k = 0; k < n4; k += 4) {
          const __m256 x0 = _mm256_loadu_ps(xa + size_t(k) * 4), x1 = _mm256_loadu_ps(xa + size_t(k) * 4 + 8);
          const __m256 x2 = _mm256_loadu_ps(xb + size_t(k) * 4), x3 = _mm256_loadu_ps(xb + size_t(k) * 4 + 8);
          const __m256 v0 = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(wa + k));
          const __m256 v1 = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(wb + k));
          a[0][0] = _mm256_add_ps(a[0][0], _mm256_mul_ps(v0, x0)), a[0][1] = _mm256_add_ps(a[0][1], _mm256_mul_ps(v0, x1));
          a[0][2] = _mm256_add_ps(a[0][2], _mm256_mul_ps(v0, x2)), a[0][3] = _mm256_add_ps(a[0][3], _mm256_mul_ps(v0, x3));
          a[1][0] = _mm256_add_ps(a[1][0], _mm256_mul_ps(v1, x0)), a[1][1] = _mm256_add_ps(a[1][1], _mm256_mul_ps(v1, x1));
          a[1][2] = _mm256_add_ps(a[1][2], _mm256_mul_ps(v1, x2)), a[1][3] = _mm256_add_ps(a[1][3], _mm256_mul_ps(v1, x3));
        }
        alignas(32) float lanes[2][32];
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 4; j++) _mm256_store_ps(lanes[i] + 8 * j, a[i][j]);
        for (int i = 0; i < 2 && i0 + i < nr; i++) {
          const float* wr = wf + size_t(i0 + i) * cols;
          for (int tt = 0; tt < 8 && g0 * 4 + tt < T; tt++) {
            const int t = g0 * 4 + tt;
            const float* l = lanes[i] + tt * 4;
            float s = (l[0] + l[1]) + (l[2] + l[3]);
            for (int k = n4; k < cols; k++) s = s + wr[k] * x[size_t(t) * cols + k];
            out[size_t(t) * rows + r + i0 + i] = s;
          }
        }
      }
    }
    continue;
#endif
    for (int g0 = 0; g0 < groups; g0 += 4) {
      const float* xg = tlX.data() + size_t(g0) * gstride;
      f16v a00 = {}, a01 = {}, a02 = {}, a03 = {}, a10 = {}, a11 = {}, a12 = {}, a13 = {};
      f16v a20 = {}, a21 = {}, a22 = {}, a23 = {}, a30 = {}, a31 = {}, a32 = {}, a33 = {};
      const float* w0 = wf;
      const float* w1 = wf + cols;
      const float* w2 = wf + 2 * size_t(cols);
      const float* w3 = wf + 3 * size_t(cols);
      for (int k = 0; k < n4; k += 4) {
        f16v x0, x1, x2, x3;
        std::memcpy(&x0, xg + size_t(k) * 4, 64);
        std::memcpy(&x1, xg + gstride + size_t(k) * 4, 64);
        std::memcpy(&x2, xg + 2 * gstride + size_t(k) * 4, 64);
        std::memcpy(&x3, xg + 3 * gstride + size_t(k) * 4, 64);
        const f16v v0 = bcast(w0 + k), v1 = bcast(w1 + k), v2 = bcast(w2 + k), v3 = bcast(w3 + k);
        a00 = a00 + v0 * x0; a01 = a01 + v0 * x1; a02 = a02 + v0 * x2; a03 = a03 + v0 * x3;
        a10 = a10 + v1 * x0; a11 = a11 + v1 * x1; a12 = a12 + v1 * x2; a13 = a13 + v1 * x3;
        a20 = a20 + v2 * x0; a21 = a21 + v2 * x1; a22 = a22 + v2 * x2; a23 = a23 + v2 * x3;
        a30 = a30 + v3 * x0; a31 = a31 + v3 * x1; a32 = a32 + v3 * x2; a33 = a33 + v3 * x3;
      }
      alignas(64) float lanes[4][4][16];
      const f16v all[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23}, {a30, a31, a32, a33}};
      std::memcpy(lanes, all, sizeof lanes);
      for (int i = 0; i < nr; i++) {
        const float* wr = wf + size_t(i) * cols;
        for (int tt = 0; tt < 16 && g0 * 4 + tt < T; tt++) {
          const int t = g0 * 4 + tt;
          const float* a = lanes[i][tt / 4] + (tt % 4) * 4;
          float s = (a[0] + a[1]) + (a[2] + a[3]);
          for (int k = n4; k < cols; k++) s = s + wr[k] * x[size_t(t) * cols + k];
          out[size_t(t) * rows + r + i] = s;
        }
      }
    }
  }
}

// ---- Q8_0 --------------------------------------------------------------------------------
// Per (row, token, block) the exact integer sum, then sumf = sumf + f32(isum) * (dw * dx) in
// block order. With AVX512-VNNI, 16 tokens at once: activations offset to u8 (q + 128) and
// regrouped as xu[block][4-byte group j][token][4]; vpdpbusd against a broadcast weight group
// gives Σ(q+128)w, and subtracting 128·Σw (exact) leaves the integer dot.

static thread_local std::vector<uint8_t> tlXu;
static thread_local std::vector<float> tlD;   // scales [T, nb]
static thread_local std::vector<float> tlDg;  // scales regrouped [group][block][16 tokens]

static thread_local std::vector<int16_t> tlXq;

void matmulQ8(const uint8_t* w, const int16_t* xq, const float* xd, float* out, int rows, int cols, int T, int r0, int r1) {
  tlXq.assign(xq, xq + size_t(T) * cols);
  matmulQ8Prepare(nullptr, xd, cols, T);
  matmulQ8Rows(w, out, rows, cols, T, r0, r1);
}


void matmulQ8Prepare(const int8_t* xs, const float* xd, int cols, int T) {
  const int nb = cols / 32;
#ifdef LS_AVX2Q8
  // AVX2 (issue 40): matmul-q8-avx2.cc, from the int8 quants (or the i16 ones matmulQ8 holds).
  matmulQ8PrepareAvx2(xs, xs ? nullptr : tlXq.data(), xd, cols, T);
  return;
#elif defined(LS_NEONQ8)
  matmulQ8PrepareNeon(xs, xs ? nullptr : tlXq.data(), xd, cols, T);
  return;
#endif
  if (xs) {
    tlXq.resize(size_t(T) * cols);
    for (size_t i = 0; i < size_t(T) * cols; i++) tlXq[i] = xs[i];
  }
  tlD.assign(xd, xd + size_t(T) * nb);
#ifdef LS_VNNI
  const int groups = (T + 15) / 16;
  const size_t gbytes = size_t(nb) * 8 * 64;  // per token group: blocks × 8 dword groups × 16 tokens × 4 bytes
  tlXu.assign(size_t(groups) * gbytes, 128);
  tlDg.assign(size_t(groups) * nb * 16, 0.0f);
  for (int t = 0; t < T; t++) {
    uint8_t* g = tlXu.data() + size_t(t / 16) * gbytes + (t % 16) * 4;
    const int16_t* q = tlXq.data() + size_t(t) * cols;
    for (int b = 0; b < nb; b++) {
      for (int j = 0; j < 8; j++) {
        uint8_t* d = g + (size_t(b) * 8 + j) * 64;
        for (int e = 0; e < 4; e++) d[e] = uint8_t(q[b * 32 + j * 4 + e] + 128);
      }
      tlDg[(size_t(t / 16) * nb + b) * 16 + t % 16] = xd[size_t(t) * nb + b];
    }
  }
#endif
}

void matmulQ8Rows(const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1) {
  const int nb = cols / 32;
  const size_t rb = size_t(nb) * 34;
#ifdef LS_VNNI
  const int groups = (T + 15) / 16;
  const size_t gbytes = size_t(nb) * 8 * 64;
  std::vector<int32_t> corr(nb);
  std::vector<float> dw(nb);
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = w + size_t(r) * rb;
    for (int b = 0; b < nb; b++) {
      int s = 0;
      for (int i = 0; i < 32; i++) s += int8_t(row[b * 34 + 2 + i]);
      corr[b] = 128 * s;
      uint16_t h;
      std::memcpy(&h, row + b * 34, 2);
      dw[b] = halfToFloat(h);
    }
    for (int g = 0; g < groups; g++) {
      const uint8_t* xg = tlXu.data() + size_t(g) * gbytes;
      const float* dg = tlDg.data() + size_t(g) * nb * 16;
      __m512 acc = _mm512_setzero_ps();
      for (int b = 0; b < nb; b++) {
        const uint8_t* qs = row + b * 34 + 2;
        const uint8_t* xb = xg + size_t(b) * 512;
        __m512i s = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
          int32_t wj;
          std::memcpy(&wj, qs + 4 * j, 4);
          s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512(xb + j * 64), _mm512_set1_epi32(wj));
        }
        s = _mm512_sub_epi32(s, _mm512_set1_epi32(corr[b]));
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(dw[b]), _mm512_loadu_ps(dg + size_t(b) * 16));
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(s), d));
      }
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc);
      for (int tt = 0; tt < 16 && g * 16 + tt < T; tt++) out[size_t(g * 16 + tt) * rows + r] = lanes[tt];
    }
  }
#elif defined(LS_AVX2Q8)
  matmulQ8RowsAvx2(w, out, rows, cols, T, r0, r1);
#elif defined(LS_NEONQ8)
  matmulQ8RowsNeon(w, out, rows, cols, T, r0, r1);
#else
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = w + size_t(r) * rb;
    for (int t = 0; t < T; t++) {
      float sumf = 0;
      for (int b = 0; b < nb; b++) {
        int isum = 0;
        for (int i = 0; i < 32; i++) isum += int(int8_t(row[b * 34 + 2 + i])) * tlXq[size_t(t) * cols + b * 32 + i];
        uint16_t h;
        std::memcpy(&h, row + b * 34, 2);
        sumf = sumf + float(isum) * (halfToFloat(h) * tlD[size_t(t) * nb + b]);
      }
      out[size_t(t) * rows + r] = sumf;
    }
  }
#endif
}

}  // namespace ls
