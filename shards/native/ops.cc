// See ops.h. Every function here reproduces a host-side definition bit for bit; the tests in
// test/shards/fast-path.test.ts compare the fused native block against the op-by-op path.
#include "ops.h"

#include "ops-common.h"

#include <cmath>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ls {

namespace {

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

}  // namespace ls
