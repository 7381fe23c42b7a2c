// Causal attention of one (token, head) for the fused block (ops.h attentionHead), bit for bit
// shards/asm/attention.ts: f32 lanes in the same order, its Cephes-style exp. Built with
// -ffp-contract=off.
#include <cmath>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "ops-common.h"
#include "ops.h"

namespace ls {

#if defined(__AVX512F__)
namespace {

inline __m128 loadK4(const void* base, size_t elem, bool half) {
  if (!half) return _mm_loadu_ps(static_cast<const float*>(base) + elem);
  const __m128i h = _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + elem)));
  const __m128i em = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x7fff)), 13);
  const __m128 f = _mm_mul_ps(_mm_castsi128_ps(em), _mm_castsi128_ps(_mm_set1_epi32(0x77800000)));
  const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
  return _mm_or_ps(f, _mm_castsi128_ps(sign));
}

inline __m512 loadV16(const void* base, size_t elem, bool half) {
  if (!half) return _mm512_loadu_ps(static_cast<const float*>(base) + elem);
  const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + elem)));
  const __m512i em = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x7fff)), 13);
  const __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(em), _mm512_castsi512_ps(_mm512_set1_epi32(0x77800000)));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
  return _mm512_or_ps(f, _mm512_castsi512_ps(sign));
}

inline float scalarK(const void* base, size_t elem, bool half) {
  return half ? halfToFloatExact(static_cast<const uint16_t*>(base)[elem]) : static_cast<const float*>(base)[elem];
}

// shards/asm/attention.ts expNeg on 16 lanes: e^x for x <= 0, the same IEEE operations in the
// same order as its f32x4 code. max_ps returns -87
// for a NaN lane where wasmMax would return NaN, but such a lane (x > -87 is false) gives 0
// either way.
inline __m512 expNeg16(__m512 x) {
  const __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(F32(-87.0)));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(F32(1.44269504088896341))), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(F32(0.693359375))));
  r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(F32(-2.12194440e-4))));
  __m512 p = _mm512_set1_ps(F32(1.9875691500e-4));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(F32(1.3981999507e-3)));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(F32(8.3334519073e-3)));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(F32(4.1665795894e-2)));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(F32(1.6666665459e-1)));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(F32(5.0000001201e-1)));
  const __m512 y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(F32(-87.0)), _CMP_GT_OQ);
  return _mm512_maskz_mul_ps(live, y, _mm512_castsi512_ps(e));
}

// q·k of 16 positions (4 groups of 4) over k[0, hd) in steps of 16: the rows are read 64 bytes
// at a time and each group's 4 × 4 blocks of 128 bits transposed (decode.cc decodeF32), so
// 128-bit lane j of acc[g] is position 4g + j's f32x4 accumulator, summed in the same order as
// 128-bit loads. Four independent add chains instead of one.
inline void dotQK16(const float* q, const float* k, const size_t* rowAt, int hd, __m512* acc) {
  for (int g = 0; g < 4; g++) acc[g] = _mm512_setzero_ps();
  for (int i = 0; i < hd; i += 16) {
    const __m512 q0 = _mm512_broadcast_f32x4(_mm_loadu_ps(q + i)), q1 = _mm512_broadcast_f32x4(_mm_loadu_ps(q + i + 4));
    const __m512 q2 = _mm512_broadcast_f32x4(_mm_loadu_ps(q + i + 8)), q3 = _mm512_broadcast_f32x4(_mm_loadu_ps(q + i + 12));
    for (int g = 0; g < 4; g++) {
      const __m512 a = _mm512_loadu_ps(k + rowAt[4 * g] + i), b = _mm512_loadu_ps(k + rowAt[4 * g + 1] + i);
      const __m512 c = _mm512_loadu_ps(k + rowAt[4 * g + 2] + i), d = _mm512_loadu_ps(k + rowAt[4 * g + 3] + i);
      const __m512 u0 = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0));
      const __m512 u1 = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2));
      const __m512 u2 = _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0));
      const __m512 u3 = _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2));
      acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(2, 0, 2, 0)), q0));
      acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(3, 1, 3, 1)), q1));
      acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(2, 0, 2, 0)), q2));
      acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(3, 1, 3, 1)), q3));
    }
  }
}

// The same 16 positions from 128-bit loads (f16 rows, or hd not a multiple of 16).
inline void dotQK16Narrow(const float* q, const void* k, bool half, const size_t* rowAt, int hd4, __m512* acc) {
  for (int g = 0; g < 4; g++) acc[g] = _mm512_setzero_ps();
  for (int i = 0; i < hd4; i += 4) {
    const __m512 qv = _mm512_broadcast_f32x4(_mm_loadu_ps(q + i));
    for (int g = 0; g < 4; g++) {
      __m512 kv = _mm512_castps128_ps512(loadK4(k, rowAt[4 * g] + i, half));
      kv = _mm512_insertf32x4(kv, loadK4(k, rowAt[4 * g + 1] + i, half), 1);
      kv = _mm512_insertf32x4(kv, loadK4(k, rowAt[4 * g + 2] + i, half), 2);
      kv = _mm512_insertf32x4(kv, loadK4(k, rowAt[4 * g + 3] + i, half), 3);
      acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(qv, kv));
    }
  }
}

}  // namespace

void attentionHead(const float* q, const void* k, const void* v, bool half, float* out, int len, int rowElems, int hd, float* att) {
  const float scale = 1.0f / std::sqrt(float(hd));
  const int hd4 = hd & ~3;
  float mx = -INFINITY;
  // q·k: position p's f32x4 accumulator (attention.ts dotQK), reduced (l0 + l1) + (l2 + l3),
  // then the hd % 4 tail, times scale.
  for (int p = 0; p < len; p += 16) {
    size_t rowAt[16];
    for (int j = 0; j < 16; j++) rowAt[j] = size_t(p + j < len ? p + j : p) * rowElems;
    __m512 acc[4];
    if (!half && hd % 16 == 0) dotQK16(q, static_cast<const float*>(k), rowAt, hd, acc);
    else dotQK16Narrow(q, k, half, rowAt, hd4, acc);
    alignas(64) float lanes[64];
    for (int g = 0; g < 4; g++) _mm512_store_ps(lanes + 16 * g, acc[g]);
    for (int j = 0; j < 16 && p + j < len; j++) {
      const float* a = lanes + 4 * j;
      float s = (a[0] + a[1]) + (a[2] + a[3]);
      for (int i = hd4; i < hd; i++) s += q[i] * scalarK(k, rowAt[j] + i, half);
      s = s * scale;
      att[p + j] = s;
      mx = wasmMax(mx, s);
    }
  }
  // Softmax: 4 running sums, sum l over positions p ≡ l (mod 4) in order (attention.ts).
  const int len4 = (len + 3) & ~3;
  for (int p = len; p < len4; p++) att[p] = -INFINITY;
  const __m512 mxv = _mm512_set1_ps(mx);
  __m128 sv = _mm_setzero_ps();
  int p = 0;
  for (; p + 16 <= len4; p += 16) {
    const __m512 e = expNeg16(_mm512_sub_ps(_mm512_loadu_ps(att + p), mxv));
    _mm512_storeu_ps(att + p, e);
    sv = _mm_add_ps(sv, _mm512_castps512_ps128(e));
    sv = _mm_add_ps(sv, _mm512_extractf32x4_ps(e, 1));
    sv = _mm_add_ps(sv, _mm512_extractf32x4_ps(e, 2));
    sv = _mm_add_ps(sv, _mm512_extractf32x4_ps(e, 3));
  }
  if (p < len4) {
    const __mmask16 m = __mmask16((1u << (len4 - p)) - 1);
    const __m512 e = expNeg16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, att + p), mxv));
    _mm512_mask_storeu_ps(att + p, m, e);
    for (int g = 0; 4 * g < len4 - p; g++) {
      alignas(16) float four[16];
      _mm512_store_ps(four, e);
      sv = _mm_add_ps(sv, _mm_load_ps(four + 4 * g));
    }
  }
  alignas(16) float svl[4];
  _mm_store_ps(svl, sv);
  const float sum = (svl[0] + svl[1]) + (svl[2] + svl[3]);
  const __m512 sumv = _mm512_set1_ps(sum);
  for (p = 0; p + 16 <= len4; p += 16) _mm512_storeu_ps(att + p, _mm512_div_ps(_mm512_loadu_ps(att + p), sumv));
  for (; p < len4; p++) att[p] = att[p] / sum;
  // out[i] = Σ_p att[p] v[p, i], p ascending, one accumulator per element; up to 4 chunks of
  // 16 elements side by side so their add chains overlap.
  int i = 0;
  for (; i + 64 <= hd; i += 64) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int pp = 0; pp < len; pp++) {
      const __m512 w = _mm512_set1_ps(att[pp]);
      const size_t at = size_t(pp) * rowElems + i;
      a0 = _mm512_add_ps(a0, _mm512_mul_ps(w, loadV16(v, at, half)));
      a1 = _mm512_add_ps(a1, _mm512_mul_ps(w, loadV16(v, at + 16, half)));
      a2 = _mm512_add_ps(a2, _mm512_mul_ps(w, loadV16(v, at + 32, half)));
      a3 = _mm512_add_ps(a3, _mm512_mul_ps(w, loadV16(v, at + 48, half)));
    }
    _mm512_storeu_ps(out + i, a0);
    _mm512_storeu_ps(out + i + 16, a1);
    _mm512_storeu_ps(out + i + 32, a2);
    _mm512_storeu_ps(out + i + 48, a3);
  }
  for (; i + 32 <= hd; i += 32) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int pp = 0; pp < len; pp++) {
      const __m512 w = _mm512_set1_ps(att[pp]);
      const size_t at = size_t(pp) * rowElems + i;
      a0 = _mm512_add_ps(a0, _mm512_mul_ps(w, loadV16(v, at, half)));
      a1 = _mm512_add_ps(a1, _mm512_mul_ps(w, loadV16(v, at + 16, half)));
    }
    _mm512_storeu_ps(out + i, a0);
    _mm512_storeu_ps(out + i + 16, a1);
  }
  for (; i + 16 <= hd; i += 16) {
    __m512 a = _mm512_setzero_ps();
    for (int pp = 0; pp < len; pp++) a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(att[pp]), loadV16(v, size_t(pp) * rowElems + i, half)));
    _mm512_storeu_ps(out + i, a);
  }
  for (; i < hd; i++) {
    float s = 0;
    for (int pp = 0; pp < len; pp++) s = s + att[pp] * scalarK(v, size_t(pp) * rowElems + i, half);
    out[i] = s;
  }
}
#else
void attentionHead(const float*, const void*, const void*, bool, float*, int, int, int, float*) {}
#endif

}  // namespace ls
