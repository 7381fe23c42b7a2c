// See ops.h. Every function here reproduces a host-side definition bit for bit; the tests in
// test/shards/fast-path.test.ts compare the fused native block against the op-by-op path.
#include "ops.h"

#include <cmath>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ls {

namespace {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// WebAssembly f32.max: NaN in, NaN out; max(-0, +0) = +0.
inline float wasmMax(float a, float b) {
  if (a != a || b != b) return a + b;
  if (a == b) return floatOf(bitsOf(a) & bitsOf(b));
  return a > b ? a : b;
}

// AssemblyScript reads a float literal as f64 and then narrows it: (float)(double literal).
#define F32(lit) static_cast<float>(lit)

// shards/asm/attention.ts expNeg, one lane.
inline float expNeg(float x) {
  const float xc = wasmMax(x, F32(-87.0));
  const float n = std::nearbyintf(xc * F32(1.44269504088896341));
  float r = xc - n * F32(0.693359375);
  r = r - n * F32(-2.12194440e-4);
  float p = F32(1.9875691500e-4);
  p = p * r + F32(1.3981999507e-3);
  p = p * r + F32(8.3334519073e-3);
  p = p * r + F32(4.1665795894e-2);
  p = p * r + F32(1.6666665459e-1);
  p = p * r + F32(5.0000001201e-1);
  const float y = ((p * r) * r + r) + 1.0f;
  const float pow2n = floatOf(uint32_t(int32_t(n) + 127) << 23);
  return x > F32(-87.0) ? y * pow2n : floatOf(0);
}

inline float roundAway(float v) {
  const float t = std::truncf(v);
  const float frac = std::fabs(v - t);
  const float signOne = floatOf((bitsOf(v) & 0x80000000u) | bitsOf(1.0f));
  return t + (frac >= 0.5f ? signOne : floatOf(0));
}

inline double fromWords(uint32_t hi, uint32_t lo) {
  const uint64_t u = (uint64_t(hi) << 32) | lo;
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

}  // namespace

double jsExp(double x) {
  static const double one = 1.0, halF[2] = {0.5, -0.5}, o_threshold = 7.09782712893383973096e+02,
                      u_threshold = -7.45133219101941108420e+02,
                      ln2HI[2] = {6.93147180369123816490e-01, -6.93147180369123816490e-01},
                      ln2LO[2] = {1.90821492927058770002e-10, -1.90821492927058770002e-10},
                      invln2 = 1.44269504088896338700e+00, P1 = 1.66666666666666019037e-01,
                      P2 = -2.77777777770155933842e-03, P3 = 6.61375632143793436117e-05,
                      P4 = -1.65339022054652515390e-06, P5 = 4.13813679705723846039e-08, E = 2.718281828459045;
  static volatile double huge = 1.0e+300, twom1000 = 9.33263618503218878990e-302, two1023 = 8.988465674311579539e307;
  double y, hi = 0.0, lo = 0.0, c, t, twopk;
  int32_t k = 0;
  uint64_t u;
  std::memcpy(&u, &x, 8);
  uint32_t hx = uint32_t(u >> 32);
  const int xsb = (hx >> 31) & 1;
  hx &= 0x7FFFFFFF;
  if (hx >= 0x40862E42) {
    if (hx >= 0x7FF00000) {
      if (((hx & 0xFFFFF) | uint32_t(u)) != 0) return x + x;
      return xsb == 0 ? x : 0.0;
    }
    if (x > o_threshold) return huge * huge;
    if (x < u_threshold) return twom1000 * twom1000;
  }
  if (hx > 0x3FD62E42) {
    if (hx < 0x3FF0A2B2) {
      if (x == 1.0) return E;
      hi = x - ln2HI[xsb];
      lo = ln2LO[xsb];
      k = 1 - xsb - xsb;
    } else {
      k = static_cast<int32_t>(invln2 * x + halF[xsb]);
      t = k;
      hi = x - t * ln2HI[0];
      lo = t * ln2LO[0];
    }
    x = hi - lo;
  } else if (hx < 0x3E300000) {
    if (huge + x > one) return one + x;
  } else {
    k = 0;
  }
  t = x * x;
  if (k >= -1021) twopk = fromWords(0x3FF00000u + (uint32_t(k) << 20), 0);
  else twopk = fromWords(0x3FF00000u + (uint32_t(k + 1000) << 20), 0);
  c = x - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
  if (k == 0) return one - ((x * c) / (c - 2.0) - x);
  y = one - ((lo - (x * c) / (2.0 - c)) - hi);
  if (k >= -1021) {
    if (k == 1024) return y * 2.0 * two1023;
    return y * twopk;
  }
  return y * twopk * twom1000;
}

void rmsnormRow(float* out, const float* x, const float* weight, int n, double eps) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += double(x[i]) * double(x[i]);
  const float mean = float(ss / n);
  const float f = float(double(mean) + eps);
  const double scale = 1.0 / std::sqrt(double(f));
  for (int i = 0; i < n; i++) out[i] = float(double(weight[i]) * double(float(scale * double(x[i]))));
}

uint16_t floatToHalf(float value) {
  const uint32_t x = bitsOf(value);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int exp = int((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) return uint16_t(sign | 0x7c00 | (mant != 0 ? 0x200 : 0));
  const int e = exp - 127 + 15;
  if (e >= 31) return uint16_t(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return uint16_t(sign);
    mant |= 0x800000;
    const uint32_t shift = uint32_t(14 - e);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1) == 1)) half++;
    return uint16_t(sign | half);
  }
  uint32_t half = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1) == 1)) half++;
  return uint16_t(sign | half);
}

float halfToFloatExact(uint16_t h) {
  const float f = floatOf(uint32_t(h & 0x7fff) << 13) * floatOf(0x77800000u);
  return floatOf(bitsOf(f) | (uint32_t(h & 0x8000) << 16));
}

// One block of shards/asm/matmul-q8.ts quantizeQ8, lane for lane.
static void quantizeBlock(const float* src, int8_t* xs, float* xd, int32_t* xsumBias, int bias) {
  float m[4] = {0, 0, 0, 0};
  for (int i = 0; i < 32; i += 4)
    for (int l = 0; l < 4; l++) m[l] = wasmMax(m[l], std::fabs(src[i + l]));
  const float amax = wasmMax(wasmMax(m[0], m[1]), wasmMax(m[2], m[3]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  *xd = halfToFloatExact(floatToHalf(d));
  int s = 0;
  for (int i = 0; i < 32; i++) {
    // trunc_sat then i16 narrowing saturate; |q| <= 127 for finite inputs
    const float r = roundAway(src[i] * id);
    int q = r != r ? 0 : r >= 2147483647.0f ? 2147483647 : r <= -2147483648.0f ? int(-2147483647 - 1) : int(r);
    q = q > 32767 ? 32767 : q < -32768 ? -32768 : q;
    xs[i] = int8_t(q);
    s += int8_t(q);
  }
  *xsumBias = bias * s;
}

void quantizeRowQ8(const float* x, int8_t* xs, float* xd, int32_t* xsumBias, int cols, int bias) {
  const int nb = cols / 32;
  for (int b = 0; b < nb; b++) {
    const float* src = x + b * 32;
#if defined(__AVX512F__)
    // The same elementwise IEEE operations 16 lanes at a time (amax is a max: any order; the
    // quants are exact integers). Blocks with inf or NaN take the scalar path.
    const __m512 absMask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 v0 = _mm512_loadu_ps(src), v1 = _mm512_loadu_ps(src + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absMask), _mm512_and_ps(v1, absMask)));
    if (amax <= 3.4028234663852886e38f) {
      const float d = amax / 127.0f;
      const float id = d != 0 ? 1.0f / d : 0.0f;
      xd[b] = halfToFloatExact(floatToHalf(d));
      const __m512 signMask = _mm512_castsi512_ps(_mm512_set1_epi32(int(0x80000000u)));
      __m512i q[2];
      for (int h = 0; h < 2; h++) {
        const __m512 v = _mm512_mul_ps(h ? v1 : v0, _mm512_set1_ps(id));
        const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m512 frac = _mm512_and_ps(_mm512_sub_ps(v, t), absMask);
        const __m512 signOne = _mm512_or_ps(_mm512_and_ps(v, signMask), _mm512_set1_ps(1.0f));
        const __mmask16 away = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
        q[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, away, t, signOne));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(xs + b * 32 + 16 * h), _mm512_cvtsepi32_epi8(q[h]));
      }
      xsumBias[b] = bias * _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
      continue;
    }
#endif
    quantizeBlock(src, xs + b * 32, xd + b, xsumBias + b, bias);
  }
}

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

// expNeg above on 16 lanes: the same IEEE operations in the same order. max_ps returns -87
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
