// Matmuls on the GGUF block types Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and BF16
// (block layouts: ggml-common.h), bit-identical to shards/kernels-ref-exact-quant.ts:
// - Activations are quantised as llama.cpp's CPU backend does: Q8_0 blocks of 32 for the
//   legacy types (the same quantizeRowQ8 as the Q8_0 kernels), Q8_K super-blocks of 256 for the
//   K-quants (ggml quantize_row_q8_K_ref: f32 scale, Σq per 16). BF16 multiplies f32 x.
// - Inside a block every sum is an exact integer (u8 quants × s8 activations through
//   maddubs/vpdpbusd, pairs far below 2^15; sub-block scales through madd/vpdpwssd), so SIMD
//   order does not matter; the few float steps per block then run in block order per
//   (row, token), one row per chain. Results do not depend on how rows are split over threads.
// This file quantises the activations and dispatches: batched kernels (quant-batch.cc) from
// kBatchedFrom tokens on, 8-row kernels (quant-decode.cc) for Q4_0–Q5_1 and Q4_K–Q6_K below it
// (or for every T when the batched ones are not built), and its own one-row kernels for Q2_K,
// Q3_K and BF16.
// Built with -ffp-contract=off (build.mjs): no FMA, each float product and sum rounds alone.
#include "quant-dot.h"

#include <cstring>
#include <vector>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "batch.h"
#include "ops.h"
#include "quant-internal.h"

namespace ls {

size_t quantRowBytes(int type, int cols) {
  int elems = 0, bytes = 0;
  switch (type) {
    case kTypeQ4_0: elems = 32, bytes = 18; break;
    case kTypeQ4_1: elems = 32, bytes = 20; break;
    case kTypeQ5_0: elems = 32, bytes = 22; break;
    case kTypeQ5_1: elems = 32, bytes = 24; break;
    case kTypeQ2_K: elems = 256, bytes = 84; break;
    case kTypeQ3_K: elems = 256, bytes = 110; break;
    case kTypeQ4_K: elems = 256, bytes = 144; break;
    case kTypeQ5_K: elems = 256, bytes = 176; break;
    case kTypeQ6_K: elems = 256, bytes = 210; break;
    case kTypeBF16: elems = 1, bytes = 2; break;
    default: return 0;
  }
  if (cols <= 0 || cols % elems != 0) return 0;
  return size_t(cols / elems) * bytes;
}

#if defined(__AVX2__)

bool quantAvailable(int type) { return quantRowBytes(type, 256) != 0; }

namespace {

bool isK(int type) { return type >= kTypeQ2_K && type <= kTypeQ6_K; }

// From kBatchedFrom (batch.h: shards/options.ts NATIVE_BATCHED_FROM) on the batched kernels
// take the rows, as for Q8_0.

// This thread's activations: int8 quants, one scale per block, Σq per block (Q8_0) or per 16
// (Q8_K); one set per format, so a phase of the fused block may mix legacy and K types.
using Acts = QuantActs;
thread_local Acts tlLegacy, tlK;

inline __m256i srl16(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }

// acc + Σ pairs of (u8 quants · s8 activations) × i16 scales, as i32 lanes. Exact: quants ≤ 63
// keep each maddubs pair ≤ 2·63·127 < 2^15.
inline __m256i dotScaled(__m256i acc, __m256i u, __m256i s, __m256i sc16) {
  const __m256i p = _mm256_maddubs_epi16(u, s);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, p, sc16);
#elif defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(acc, p, sc16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc16));
#endif
}


inline __m256i pair16(int lo, int hi) { return _mm256_set_m128i(_mm_set1_epi16(short(hi)), _mm_set1_epi16(short(lo))); }

// IEEE half bit patterns (low 16 bits of each lane) to f32 exactly as halfToFloatExact.
inline __m256 half8(__m256i h) {
  const __m256i em = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7fff)), 13);
  const __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(em), _mm256_set1_ps(5.192296858534828e33f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
  return _mm256_or_ps(f, _mm256_castsi256_ps(sign));
}

// ---- K-quants: one row against one token's Q8_K activations --------------------------------
// Each block type gives, per super-block, i32 lane vectors p (lanes sum to Σ sc·(q·qx), offsets
// folded in exactly) and m (lanes sum to Σ mn·Σqx, types with mins). Eight super-blocks are
// reduced at once (reduce8) and their float terms computed 8 wide; the terms then join the
// row's sum one by one in block order, the canonical chain.

// Lane i = horizontal sum of p[i] (integer, exact in any order).
inline __m256i reduce8(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Q3_K: 16 sub-blocks of 16, 6-bit scales − 32, quants 2 low bits + high bit (hmask), value
// low − 4·(1 − high), taken here as (low + 4·high) − 4.
inline void blockQ3K(const uint8_t* blk, const int8_t* x, const int32_t* bs, __m256i& p, __m256i&) {
  const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  const uint8_t* s = blk + 96;
  alignas(32) int32_t sc[16];
  for (int j = 0; j < 16; j++) {
    const int lo = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
    sc[j] = (lo | (((s[8 + (j & 3)] >> (2 * (j >> 2))) & 3) << 4)) - 32;
  }
  const __m256i hm = load(blk);
  __m256i acc = _mm256_setzero_si256();
  for (int n = 0; n < 2; n++) {
    const __m256i qv = load(blk + 32 + 32 * n);
    for (int j = 0; j < 4; j++) {
      const __m256i low = _mm256_and_si256(srl16(qv, 2 * j), m2);
      const __m256i high = _mm256_slli_epi16(_mm256_and_si256(srl16(hm, 4 * n + j), one), 2);
      acc = dotScaled(acc, _mm256_or_si256(low, high), load(x + 128 * n + 32 * j), pair16(sc[8 * n + 2 * j], sc[8 * n + 2 * j + 1]));
    }
  }
  const __m256i corr = _mm256_add_epi32(_mm256_mullo_epi32(load(sc), load(bs)), _mm256_mullo_epi32(load(sc + 8), load(bs + 8)));
  p = _mm256_sub_epi32(acc, _mm256_slli_epi32(corr, 2));
}

// Q2_K: 16 sub-blocks of 16, 4-bit scale (low nibble) and min (high nibble), quants 0..3.
inline void blockQ2K(const uint8_t* blk, const int8_t* x, const int32_t* bs, __m256i& p, __m256i& m) {
  const __m256i m2 = _mm256_set1_epi8(3);
  __m256i acc = _mm256_setzero_si256();
  for (int n = 0; n < 2; n++) {
    const __m256i qv = load(blk + 16 + 32 * n);
    for (int j = 0; j < 4; j++)
      acc = dotScaled(acc, _mm256_and_si256(srl16(qv, 2 * j), m2), load(x + 128 * n + 32 * j),
                      pair16(blk[8 * n + 2 * j] & 0xf, blk[8 * n + 2 * j + 1] & 0xf));
  }
  p = acc;
  const __m128i s16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
  const __m128i mins = _mm_and_si128(_mm_srli_epi16(s16, 4), _mm_set1_epi8(0x0f));
  m = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_cvtepu8_epi32(mins), load(bs)),
                       _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(mins, 8)), load(bs + 8)));
}

// One row: super-blocks 8 at a time. BlockBytes, the d (and dmin) byte offsets and whether the
// type has mins come from the layout (ggml-common.h). The gather reads 4 bytes at DAt: where d
// ends the block (Q3_K) it is read with the 2 bytes before it (DHigh: d in the high half), so no
// read passes the block's, and maybe the buffer's, end.
template <void (*Block)(const uint8_t*, const int8_t*, const int32_t*, __m256i&, __m256i&), int BlockBytes, int DAt, int DminAt, bool DHigh = false>
float dotK(const uint8_t* row, const int8_t* xs, const float* xd, const int32_t* bs, int nb) {
  float sumf = 0;
  for (int b0 = 0; b0 < nb; b0 += 8) {
    const int n = nb - b0 < 8 ? nb - b0 : 8;
    __m256i p[8], m[8];
    alignas(32) int32_t at[8];
    for (int i = 0; i < 8; i++) {
      p[i] = m[i] = _mm256_setzero_si256();
      // Gather offsets of d (dmin in the high half where it follows d); past n, the last block.
      at[i] = (i < n ? i : n - 1) * BlockBytes + DAt;
      if (i >= n) continue;
      Block(row + size_t(b0 + i) * BlockBytes, xs + size_t(b0 + i) * 256, bs + size_t(b0 + i) * 16, p[i], m[i]);
    }
    const __m256i h = _mm256_i32gather_epi32(reinterpret_cast<const int*>(row + size_t(b0) * BlockBytes), _mm256_load_si256(reinterpret_cast<const __m256i*>(at)), 1);
    alignas(32) float dx[8] = {};
    for (int i = 0; i < n; i++) dx[i] = xd[b0 + i];
    const __m256 dxv = _mm256_load_ps(dx);
    __m256 term = _mm256_mul_ps(_mm256_mul_ps(dxv, half8(DHigh ? _mm256_srli_epi32(h, 16) : h)), _mm256_cvtepi32_ps(reduce8(p)));
    if (DminAt >= 0) {
      static_assert(DminAt < 0 || DminAt == DAt + 2, "dmin follows d");
      term = _mm256_sub_ps(term, _mm256_mul_ps(_mm256_mul_ps(dxv, half8(_mm256_srli_epi32(h, 16))), _mm256_cvtepi32_ps(reduce8(m))));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, term);
    for (int i = 0; i < n; i++) sumf = sumf + lanes[i];
  }
  return sumf;
}

// ---- BF16: f32 activations, the f32 kernels' order (4 lanes over k, then (l0+l1)+(l2+l3)) --

inline __m128 bf16x4(const uint8_t* p) {
  return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 16));
}

void bf16Rows(const uint8_t* w, const float* xAll, float* out, int rows, int cols, int T, int r0, int r1) {
  const int n4 = cols & ~3;
  const size_t rb = size_t(cols) * 2;
  for (int r = r0; r < r1; r += 4) {
    const int nr = r1 - r < 4 ? r1 - r : 4;
    const uint8_t* wr[4];
    for (int i = 0; i < 4; i++) wr[i] = w + size_t(r + (i < nr ? i : 0)) * rb;
    for (int t = 0; t < T; t++) {
      const float* x = xAll + size_t(t) * cols;
      __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps(), a2 = _mm_setzero_ps(), a3 = _mm_setzero_ps();
      for (int k = 0; k < n4; k += 4) {
        const __m128 xv = _mm_loadu_ps(x + k);
        a0 = _mm_add_ps(a0, _mm_mul_ps(bf16x4(wr[0] + 2 * k), xv));
        a1 = _mm_add_ps(a1, _mm_mul_ps(bf16x4(wr[1] + 2 * k), xv));
        a2 = _mm_add_ps(a2, _mm_mul_ps(bf16x4(wr[2] + 2 * k), xv));
        a3 = _mm_add_ps(a3, _mm_mul_ps(bf16x4(wr[3] + 2 * k), xv));
      }
      alignas(16) float l[4][4];
      _mm_store_ps(l[0], a0), _mm_store_ps(l[1], a1), _mm_store_ps(l[2], a2), _mm_store_ps(l[3], a3);
      for (int i = 0; i < nr; i++) {
        float s = (l[i][0] + l[i][1]) + (l[i][2] + l[i][3]);
        for (int k = n4; k < cols; k++) {
          uint32_t bits = uint32_t(wr[i][2 * k] | (wr[i][2 * k + 1] << 8)) << 16;
          float wv;
          std::memcpy(&wv, &bits, 4);
          s = s + wv * x[k];
        }
        out[size_t(t) * rows + r + i] = s;
      }
    }
  }
}

}  // namespace

void quantPrepare(int type, const float* x, int cols, int T) {
  if (type == kTypeBF16) return;
  const bool k = isK(type);
  Acts& a = k ? tlK : tlLegacy;
  const int nb = cols / (k ? 256 : 32);
  a.xs.resize(size_t(T) * cols);
  a.xd.resize(size_t(T) * nb);
  a.xsum.resize(size_t(T) * (k ? cols / 16 : nb));
  for (int t = 0; t < T; t++) {
    const float* row = x + size_t(t) * cols;
    int8_t* xs = a.xs.data() + size_t(t) * cols;
    if (k) quantizeRowQ8K(row, xs, a.xd.data() + size_t(t) * nb, a.xsum.data() + size_t(t) * (cols / 16), cols);
    else quantizeRowQ8(row, xs, a.xd.data() + size_t(t) * nb, a.xsum.data() + size_t(t) * nb, cols, 1);
  }
  // Σq per 16 as i16: the decode kernels' and the AVX2 batched ones' (not AVX512-VNNI batches').
  if (k) {
    a.bsum16.resize(a.xsum.size());
    for (size_t i = 0; i < a.xsum.size(); i++) a.bsum16[i] = int16_t(a.xsum[i]);
  }
  if (T >= kBatchedFrom && quantBatchAvailable()) quantBatchPrepare(k, a, cols, T);
}

void quantRows(int typeCode, const uint8_t* w, const float* x, float* out, int rows, int cols, int T, int r0, int r1, int wRows) {
  const int type = baseType(typeCode);
  if (type == kTypeBF16) {
    bf16Rows(w, x, out, rows, cols, T, r0, r1);
    return;
  }
  const size_t rb = quantRowBytes(type, cols);
  const bool k = isK(type);
  const int nb = cols / (k ? 256 : 32);
  const size_t sumStride = k ? size_t(cols) / 16 : size_t(nb);
  const Acts& a = k ? tlK : tlLegacy;
  if (T >= kBatchedFrom && quantBatchAvailable()) {
    quantRowsBatched(typeCode, w, wRows, a, out, rows, cols, T, r0, r1);
    return;
  }
  // The 8-row kernels for every T when no batched kernels were built.
  if (quantDecode8(typeCode, w, wRows, a, out, rows, cols, T, r0, r1)) return;
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = w + size_t(r) * rb;
    for (int t = 0; t < T; t++) {
      const int8_t* xs = a.xs.data() + size_t(t) * cols;
      const float* xd = a.xd.data() + size_t(t) * nb;
      const int32_t* bs = a.xsum.data() + size_t(t) * sumStride;
      float v;
      switch (type) {
        case kTypeQ3_K: v = dotK<blockQ3K, 110, 106, -1, true>(row, xs, xd, bs, nb); break;
        default: v = dotK<blockQ2K, 84, 80, 82>(row, xs, xd, bs, nb); break;  // Q2_K
      }
      out[size_t(t) * rows + r] = v;
    }
  }
}

#else
bool quantAvailable(int) { return false; }
void quantPrepare(int, const float*, int, int) {}
void quantRows(int, const uint8_t*, const float*, float*, int, int, int, int, int, int) {}
#endif

}  // namespace ls
