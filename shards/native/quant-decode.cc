// Decode-sized (T < kBatchedFrom) matmuls for Q4_K, Q5_K, Q6_K and the legacy Q4_0, Q4_1, Q5_0,
// Q5_1, 8 rows per pass over the activations, with the canonical arithmetic of shards/kernels-ref-exact-quant.ts (the same bits
// as quant-dot.cc's one-row kernels and the WebAssembly ones):
// - Inside a block every sum is an exact integer (6-bit or smaller u8 quants times s8
//   Q8_K activations, per 4 through vpdpbusd or maddubs+madd, then sub-block scales through
//   vpdpwssd/madd), so the SIMD grouping does not change it.
// - The per-block float steps (dx·d, dx·dmin, their products with the integer sums, the
//   difference, the running sum over blocks in order) run 8 rows wide, one row per lane: lane i
//   is exactly row i's canonical chain. No lane ever mixes rows, so the result of a row does not
//   depend on which 8-row group (or thread) computed it.
// The gain over one row at a time: the eight rows' d/dmin come in one gather, the per-block
// integer totals of eight rows in one horizontal-reduction tree, and the float chain is one
// vector add per block instead of eight dependent scalar adds.
// Built with -ffp-contract=off (build.mjs): no FMA, each float product and sum rounds alone.
#include <cstring>

#include "quant-dot.h"
#include "quant-internal.h"
#include "quant-q6-avx512.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ls {

#if defined(__AVX2__)
namespace {

inline __m256i load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i srl16(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }

// Σ u8·s8 per 4 consecutive bytes as 8 i32 lanes (exact for u8 ≤ 63: 4·63·128 < 2^15).
inline __m256i dotU8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// acc + Σ pairs of i16 a·b as i32 lanes.
inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, a, b);
#elif defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// Lane i = horizontal sum of p[i] (integer, exact in any order).
inline __m256i reduce8(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Lane i = horizontal sum of the 4-lane half of q[i / 2] that holds row i (row 2j in the low
// 128 bits of q[j], row 2j + 1 in the high ones).
inline __m256i reduce8Halves(const __m256i* q) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(q[0], q[1]), _mm256_hadd_epi32(q[2], q[3]));
  // a = [r0 r2 r4 r6 | r1 r3 r5 r7]
  return _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// IEEE half bit patterns (low 16 bits of each lane) to f32 exactly as halfToFloatExact.
inline __m256 half8(__m256i h) {
  const __m256i em = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7fff)), 13);
  const __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(em), _mm256_set1_ps(5.192296858534828e33f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
  return _mm256_or_ps(f, _mm256_castsi256_ps(sign));
}

// Q4_K (Five = false) / Q5_K block: lanes summing to Σ sc·(q·qx), and lanes summing to
// Σ mn·Σqx (bs32: Σqx per sub-block as i16, in both halves), each half of mins the same.
// Scales and mins as get_scale_min_k4 (ggml-quants.c), all 16 at once from the 12 bytes:
// sc j < 4 = s[j] & 63, mn j < 4 = s[j+4] & 63; sc j ≥ 4 = (s[j+4] & 15) | (s[j−4] >> 6) << 4,
// mn j ≥ 4 = (s[j+4] >> 4) | (s[j] >> 6) << 4. Bytes: sc 0..7, then mn 0..7, in both halves.
// Sub-block 2k is the low nibbles of qs[32k, 32k + 32), 2k + 1 the high ones (ggml-common.h).
template <bool Five>
inline __m256i dotQ45(const uint8_t* blk, const int8_t* x, __m256i bs32, __m256i& m) {
  // 16 bytes from the scales on (the last 4 are quants, unused), in both 128-bit halves.
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 4)));
  const __m256i a = _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
  const __m256i b = _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi8(-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128, 4, 5, 6, 7)));
  const __m256i low = _mm256_or_si256(
      _mm256_and_si256(a, _mm256_broadcastsi128_si256(_mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0))),
      _mm256_and_si256(srl16(a, 4), _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15))));
  const __m256i sm = _mm256_or_si256(low, _mm256_and_si256(srl16(b, 2), _mm256_set1_epi8(0x30)));
  // Mins zero-extended to i16 (byte 8 + j, then a zero byte), times Σqx per sub-block.
  const __m256i mn = _mm256_shuffle_epi8(sm, _mm256_broadcastsi128_si256(_mm_setr_epi8(8, -128, 9, -128, 10, -128, 11, -128, 12, -128, 13, -128, 14, -128, 15, -128)));
  m = _mm256_madd_epi16(mn, bs32);
  const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
  const uint8_t* qs = blk + (Five ? 48 : 16);
  const __m256i hb = Five ? load(blk + 16) : _mm256_setzero_si256();
  __m256i acc = _mm256_setzero_si256();
  for (int k = 0; k < 4; k++) {
    const __m256i qv = load(qs + 32 * k);
    __m256i lo = _mm256_and_si256(qv, m4), hi = _mm256_and_si256(srl16(qv, 4), m4);
    if (Five) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(srl16(hb, 2 * k), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(srl16(hb, 2 * k + 1), one), 4));
    }
    // Per-4 sums of the two sub-blocks fit i16 (≤ 4·31·128): pack them (exact) and weight each
    // with its scale: words 0..3 of each 128-bit half are sub-block 2k, 4..7 are 2k + 1; the
    // scale bytes 2k, 2k + 1 of sm, zero-extended.
    const __m256i pk = _mm256_packs_epi32(dotU8(lo, load(x + 64 * k)), dotU8(hi, load(x + 64 * k + 32)));
    const char s0 = char(2 * k), s1 = char(2 * k + 1), z = -128;
    const __m256i sc = _mm256_shuffle_epi8(sm, _mm256_broadcastsi128_si256(_mm_setr_epi8(s0, z, s0, z, s0, z, s0, z, s1, z, s1, z, s1, z, s1, z)));
    acc = dpwssd(acc, pk, sc);
  }
  return acc;
}

// Q6_K block: lanes summing to Σ sc·((q − 32)·qx) = Σ sc·(q·qx) − 32·Σ sc·Σqx, with q 0..63
// from 4 low bits (ql) and 2 high bits (qh), int8 scales per 16 (ggml-common.h block_q6_K).
// bs16: the 16 per-16 activation sums as i16.
inline __m256i dotQ6(const uint8_t* blk, const int8_t* x, __m256i bs16) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
  const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
  __m256i acc = _mm256_setzero_si256();
  for (int n = 0; n < 2; n++) {
    // Scales 8n..8n+7 in both halves; vector k pairs sub-block 8n+2k (low half) and 8n+2k+1.
    const __m256i scn = n == 0 ? _mm256_permute4x64_epi64(s16, 0x44) : _mm256_permute4x64_epi64(s16, 0xee);
    const __m256i a = load(blk + 64 * n), c = load(blk + 64 * n + 32), h = load(blk + 128 + 32 * n);
    const __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)),
                          _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_slli_epi16(_mm256_and_si256(srl16(h, 2), m2), 4)),
                          _mm256_or_si256(_mm256_and_si256(srl16(a, 4), m4), _mm256_slli_epi16(_mm256_and_si256(srl16(h, 4), m2), 4)),
                          _mm256_or_si256(_mm256_and_si256(srl16(c, 4), m4), _mm256_slli_epi16(_mm256_and_si256(srl16(h, 6), m2), 4))};
    for (int k = 0; k < 4; k++) {
      const short lo = short(0x0100 * (4 * k + 1) + 4 * k), hi = short(0x0100 * (4 * k + 3) + 4 * k + 2);
      const __m256i sc = _mm256_shuffle_epi8(scn, _mm256_setr_epi16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi));
      acc = dpwssd(acc, _mm256_maddubs_epi16(q[k], load(x + 128 * n + 32 * k)), sc);
    }
  }
  return _mm256_sub_epi32(acc, _mm256_slli_epi32(_mm256_madd_epi16(s16, bs16), 5));
}

// Stream the 8-row tile two tiles ahead into cache while this one is computed (rows of a tile
// are contiguous; the 8 interleaved streams defeat the hardware prefetcher, as in decode.cc):
// block b of 8 rows is 8·BlockBytes bytes of the tile ahead.
template <int BlockBytes>
inline void prefetchTile(const char* ahead, int b) {
  const char* p = ahead + size_t(b) * 8 * BlockBytes;
  for (int o = 0; o < 8 * BlockBytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

// Rows [r0, r1) of a plain or rows8 matrix of wRows rows (quant-layout.h): each lane reads its
// row's blocks from rowStart at a common block stride, so a pass never straddles the end of
// the tiles (passes there are cut short: the tiled rows advance 8 blocks at a time, the plain
// ones 1). Lane i is row i's canonical chain in either layout, with the same bytes per block.
template <int Type>
void rowsK(const uint8_t* w, int tiled, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1) {
  constexpr bool q6 = Type == kTypeQ6_K, five = Type == kTypeQ5_K;
  // The gather reads 4 bytes per lane: Q6_K's d is the block's last 2 bytes, so it is read with
  // the 2 before it (d in the high half); 4 bytes from d would pass the end of the block, and
  // of the buffer when the block ends a native buffer right at a page boundary.
  constexpr int bb = q6 ? 210 : five ? 176 : 144, dAt = q6 ? 206 : 0;
  const int nb = cols / 256;
  const size_t rb = size_t(nb) * bb;
  for (int r = r0; r < r1;) {
    const int end = r < tiled && tiled < r1 ? tiled : r1;
    const int nr = end - r < 8 ? end - r : 8;
    const size_t step = size_t(blockStride(tiled, r)) * bb;
    // Rows past the share repeat row r (results dropped), so every load stays in bounds.
    const uint8_t* wr[8];
    alignas(32) int32_t offs[8];
    for (int i = 0; i < 8; i++) wr[i] = rowStart(w, tiled, rb, bb, r + (i < nr ? i : 0));
    for (int i = 0; i < 8; i++) offs[i] = int32_t(wr[i] - wr[0] + dAt);
    const __m256i dIdx = _mm256_load_si256(reinterpret_cast<const __m256i*>(offs));
    // Two tiles ahead: bytes from row r + 16 on in either layout (rows8 tiles are 8·rb bytes).
    const char* ahead = reinterpret_cast<const char*>(w + size_t(r + 16) * rb);
    for (int t = 0; t < T; t++) {
      const int8_t* xs = a.xs.data() + size_t(t) * cols;
      const float* xd = a.xd.data() + size_t(t) * nb;
      const int16_t* bs16 = a.bsum16.data() + size_t(t) * (cols / 16);
      __m256 acc = _mm256_setzero_ps();
      for (int b = 0; b < nb; b++) {
        if (t == 0) prefetchTile<bb>(ahead, b);
        const int8_t* x = xs + size_t(b) * 256;
        __m256i p[8];
        __m256 term;
        const __m256 dx = _mm256_set1_ps(xd[b]);
        const __m256i h = _mm256_i32gather_epi32(reinterpret_cast<const int*>(wr[0] + size_t(b) * step), dIdx, 1);
        if (q6) {
          const __m256i bs = load(bs16 + size_t(b) * 16);
#ifdef LS_Q6_AVX512
          for (int i = 0; i < 8; i++) p[i] = dotQ6Wide(wr[i] + size_t(b) * step, x, bs);
#else
          for (int i = 0; i < 8; i++) p[i] = dotQ6(wr[i] + size_t(b) * step, x, bs);
#endif
          term = _mm256_mul_ps(_mm256_mul_ps(dx, half8(_mm256_srli_epi32(h, 16))), _mm256_cvtepi32_ps(reduce8(p)));
        } else {
          // Σqx per 32 (sub-block) from the per-16 sums, as i16 in both halves.
          const __m256i b16 = load(bs16 + size_t(b) * 16);
          const __m128i b32 = _mm_hadd_epi16(_mm256_castsi256_si128(b16), _mm256_extracti128_si256(b16, 1));
          const __m256i bsv = _mm256_broadcastsi128_si256(b32);
          __m256i mi[8], m[4];
          for (int i = 0; i < 8; i++) p[i] = dotQ45<five>(wr[i] + size_t(b) * step, x, bsv, mi[i]);
          // Both halves of mi[i] hold row i's 4 lanes: rows 2j and 2j + 1 into one vector.
          for (int j = 0; j < 4; j++) m[j] = _mm256_blend_epi32(mi[2 * j], mi[2 * j + 1], 0xf0);
          term = _mm256_mul_ps(_mm256_mul_ps(dx, half8(h)), _mm256_cvtepi32_ps(reduce8(p)));
          term = _mm256_sub_ps(term, _mm256_mul_ps(_mm256_mul_ps(dx, half8(_mm256_srli_epi32(h, 16))), _mm256_cvtepi32_ps(reduce8Halves(m))));
        }
        acc = _mm256_add_ps(acc, term);
      }
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc);
      for (int i = 0; i < nr; i++) out[size_t(t) * rows + r + i] = lanes[i];
    }
    r += nr;
  }
}

// Legacy 32-blocks against Q8_0 activations: isum = Σ u8·qx − Offset·Σqx, then per block
// main = isum·(d·dx), plus m·(dx·Σqx) for the types with a min (quant-dot.cc dotLegacy's steps).
template <int Bytes, int QsAt, int Offset, bool Five, bool Min>
void rowsLegacy(const uint8_t* w, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1) {
  const int nb = cols / 32;
  const size_t rb = size_t(nb) * Bytes;
  for (int r = r0; r < r1; r += 8) {
    const int nr = r1 - r < 8 ? r1 - r : 8;
    const uint8_t* wr[8];
    alignas(32) int32_t offs[8];
    for (int i = 0; i < 8; i++) {
      wr[i] = w + size_t(r + (i < nr ? i : 0)) * rb;
      offs[i] = int32_t((i < nr ? i : 0) * rb);
    }
    const __m256i dIdx = _mm256_load_si256(reinterpret_cast<const __m256i*>(offs));
    const char* ahead = reinterpret_cast<const char*>(w + size_t(r + 16) * rb);
    for (int t = 0; t < T; t++) {
      const int8_t* xs = a.xs.data() + size_t(t) * cols;
      const float* xd = a.xd.data() + size_t(t) * nb;
      const int32_t* xsum = a.xsum.data() + size_t(t) * nb;
      __m256 acc = _mm256_setzero_ps();
      for (int b = 0; b < nb; b++) {
        if (t == 0) prefetchTile<Bytes>(ahead, b);
        const __m256i x = load(xs + size_t(b) * 32);
        __m256i p[8];
        for (int i = 0; i < 8; i++) p[i] = dotU8(unpackLegacy<QsAt, Five>(wr[i] + size_t(b) * Bytes), x);
        __m256i isum = reduce8(p);
        if (Offset) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(Offset * xsum[b]));
        const __m256 dx = _mm256_set1_ps(xd[b]);
        const __m256i dm = _mm256_i32gather_epi32(reinterpret_cast<const int*>(wr[0] + size_t(b) * Bytes), dIdx, 1);
        __m256 term = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(half8(dm), dx));
        if (Min) term = _mm256_add_ps(term, _mm256_mul_ps(half8(_mm256_srli_epi32(dm, 16)), _mm256_mul_ps(dx, _mm256_set1_ps(float(xsum[b])))));
        acc = _mm256_add_ps(acc, term);
      }
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc);
      for (int i = 0; i < nr; i++) out[size_t(t) * rows + r + i] = lanes[i];
    }
  }
}

}  // namespace

bool quantDecode8(int type, const uint8_t* w, int wRows, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1) {
  const int tiled = rows8Tiled(type, wRows);
  switch (baseType(type)) {
    case kTypeQ4_K: rowsK<kTypeQ4_K>(w, tiled, a, out, rows, cols, T, r0, r1); return true;
    case kTypeQ5_K: rowsK<kTypeQ5_K>(w, tiled, a, out, rows, cols, T, r0, r1); return true;
    case kTypeQ6_K: rowsK<kTypeQ6_K>(w, tiled, a, out, rows, cols, T, r0, r1); return true;
    // Bytes, qs offset, quant offset, 5-bit, min: ggml-common.h block_q4_0 … block_q5_1.
    case kTypeQ4_0: rowsLegacy<18, 2, 8, false, false>(w, a, out, rows, cols, T, r0, r1); return true;
    case kTypeQ4_1: rowsLegacy<20, 4, 0, false, true>(w, a, out, rows, cols, T, r0, r1); return true;
    case kTypeQ5_0: rowsLegacy<22, 6, 16, true, false>(w, a, out, rows, cols, T, r0, r1); return true;
    case kTypeQ5_1: rowsLegacy<24, 8, 0, true, true>(w, a, out, rows, cols, T, r0, r1); return true;
    default: return false;
  }
}

#else
bool quantDecode8(int, const uint8_t*, int, const QuantActs&, float*, int, int, int, int, int) { return false; }
#endif

}  // namespace ls
