// Batched (prefill, verification, multi-session) matmuls on the block types of quant-dot.cc for
// AVX2 builds without AVX512-VNNI (issue 40): the same canonical arithmetic as quant-batch.cc
// and shards/kernels-ref-exact-quant.ts, 8 tokens per 256-bit vector instead of 16.
// K-quants: a row is unpacked once (quant-unpack.h: raw unsigned quants, before any offset:
// ≤ 63) and then meets every token (the legacy types: rowsLegacy below): per token, maddubs of 32 quants (u8) against 32 activations (s8)
// gives i16 pairs ≤ 2·63·127 < 2^15 (exact, no saturation), madd with the sub-block scales as
// i16 (the scale of each 16 in its half) gives exact i32 lanes. The type's offset (Q6_K 32,
// Q3_K 4, Q4_0 8, Q5_0 16) comes back out as offset·Σ sc·Σx and the mins term as Σ mn·Σx,
// both from the activation sums, all exact integers. Eight tokens' lane vectors reduce to one
// vector of block sums (reduce8), and the per-block float steps run per token lane in block
// order: lane t is token t's canonical chain, the bits of the decode and AVX-512 kernels.
// Built with -ffp-contract=off (build.mjs): no FMA, each float product and sum rounds alone.
#include <cstring>
#include <vector>

#include "quant-dot.h"
#include "quant-internal.h"
#include "quant-unpack.h"

#if defined(__AVX2__) && !(defined(__AVX512VNNI__) && defined(__AVX512BW__))
#define LS_QBATCH_AVX2 1
#endif

namespace ls {

#ifdef LS_QBATCH_AVX2
using namespace qunpack;

bool quantBatchAvailable() { return true; }

namespace {

// [token group][block][8], one set per format ([1]: Q8_K for the K-quants, [0]: Q8_0), so a
// phase preparing both keeps both.
thread_local std::vector<float> tlDx8[2];
thread_local std::vector<int32_t> tlSum8;  // legacy only: Σq per block, [token group][block][8]
// Legacy only: the quants regrouped [token group][block][4-byte group j][8 tokens][4], so one
// vector holds quants 4j..4j+3 of 8 tokens against a broadcast group of 4 weights (matmul-q8-avx2.cc).
thread_local std::vector<int8_t> tlXg;

// Lane i = horizontal sum of p[i] (integers: exact in any order).
inline __m256i reduce8(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

inline __m256i pair16(int lo, int hi) { return _mm256_set_m128i(_mm_set1_epi16(short(hi)), _mm_set1_epi16(short(lo))); }

// A block's scales as the kernel takes them: per 32-quant chunk c, i16 words scaling its two
// halves (sub-blocks of 16: 2c and 2c + 1; of 32: c in both), and per 16 the scale and min.
struct Scales {
  __m256i chunk[8];
  __m256i sc16, mn16;
};

void scalesOf(const Unpacked& u, int subLen, Scales& s) {
  alignas(32) int16_t sc16[16], mn16[16];
  for (int j = 0; j < 16; j++) {
    const int k = subLen == 16 ? j : j / 2;
    sc16[j] = int16_t(u.sc[k]), mn16[j] = int16_t(u.mn[k]);
  }
  for (int c = 0; c < 8; c++) s.chunk[c] = subLen == 16 ? pair16(u.sc[2 * c], u.sc[2 * c + 1]) : _mm256_set1_epi16(short(u.sc[c]));
  s.sc16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc16));
  s.mn16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mn16));
}

struct TileBlock {
  Unpacked u;
  Scales s;
};

// Rows kRows at a time: unpacked once, then every token group in turn (a group's activations,
// 8·cols bytes, stay in L1 across the rows of the tile).
constexpr int kRows = 4;

// The K-quants (Q2_K … Q6_K) against Q8_K activations, 8 chunks of 32 per super-block.
void rowsK(int type, const uint8_t* w, int tiled, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1) {
  const bool withMin = type == kTypeQ2_K || type == kTypeQ4_K || type == kTypeQ5_K;
  const int be = 256, nb = cols / be, bb = blockBytes(type), chunks = 8;
  const int groups = (T + 7) / 8, sumStride = cols / 16;
  static thread_local std::vector<TileBlock> tileBuf;
  if (tileBuf.size() < size_t(nb) * kRows) tileBuf.resize(size_t(nb) * kRows);
  TileBlock* tile = tileBuf.data();
  for (int r = r0; r < r1; r += kRows) {
    const int nr = r1 - r < kRows ? r1 - r : kRows;
    int subLen = 32;
    for (int i = 0; i < nr; i++)
      for (int b = 0; b < nb; b++) {
        TileBlock& tb = tile[size_t(i) * nb + b];
        // Plain or rows8 (quant-layout.h): the same block bytes, found through rowStart.
        subLen = unpack(type, rowStart(w, tiled, size_t(nb) * bb, bb, r + i) + size_t(b) * blockStride(tiled, r + i) * bb, tb.u);
        scalesOf(tb.u, subLen, tb.s);
      }
    for (int g = 0; g < groups; g++) {
      // Tokens past T repeat the last one (results dropped), so every load stays in bounds.
      const int8_t* xt[8];
      const int16_t* bt[8];
      for (int t = 0; t < 8; t++) {
        const int tok = g * 8 + t < T ? g * 8 + t : T - 1;
        xt[t] = a.xs.data() + size_t(tok) * cols;
        bt[t] = a.bsum16.data() + size_t(tok) * sumStride;
      }
      for (int i = 0; i < nr; i++) {
        __m256 acc = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
          const TileBlock& tb = tile[size_t(i) * nb + b];
          const Unpacked& u = tb.u;
          __m256i p[8], m[8];
          for (int t = 0; t < 8; t++) {
            const int8_t* x = xt[t] + size_t(b) * be;
            __m256i s = _mm256_setzero_si256();
            for (int c = 0; c < chunks; c++)
              s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(load(u.w + 32 * c), load(x + 32 * c)), tb.s.chunk[c]));
            if (u.off != 0 || withMin) {
              const __m256i bs = load(bt[t] + size_t(b) * 16);
              // Offsets 32 (Q6_K) and 4 (Q3_K): powers of two, exact as shifts.
              if (u.off != 0) s = _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(bs, tb.s.sc16), u.off == 32 ? 5 : 2));
              if (withMin) m[t] = _mm256_madd_epi16(bs, tb.s.mn16);
            }
            p[t] = s;
          }
          const __m256i isum = reduce8(p);
          const __m256 dx = _mm256_loadu_ps(tlDx8[1].data() + (size_t(g) * nb + b) * 8);
          __m256 term = _mm256_mul_ps(_mm256_mul_ps(dx, _mm256_set1_ps(u.d)), _mm256_cvtepi32_ps(isum));
          if (withMin) term = _mm256_sub_ps(term, _mm256_mul_ps(_mm256_mul_ps(dx, _mm256_set1_ps(u.dmin)), _mm256_cvtepi32_ps(reduce8(m))));
          acc = _mm256_add_ps(acc, term);
        }
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc);
        for (int tt = 0; tt < 8 && g * 8 + tt < T; tt++) out[size_t(g * 8 + tt) * rows + r + i] = lanes[tt];
      }
    }
  }
}

// Legacy 32-blocks (Q4_0, Q4_1, Q5_0, Q5_1): quants ≤ 31 are already the u8 operand, so no
// sign trick: maddubs of a broadcast group of 4 against 8 tokens' activations gives pairs
// ≤ 2·31·127, four of which still sum exactly in i16 (≤ 31496 < 2^15) before one madd.
void rowsLegacy(int type, const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1) {
  constexpr int kChunk = 32;
  const bool legacyMin = type == kTypeQ4_1 || type == kTypeQ5_1;
  const int nb = cols / 32, bb = blockBytes(type), groups = (T + 7) / 8;
  const __m256i ones = _mm256_set1_epi16(1);
  static thread_local std::vector<uint8_t> quants;  // [chunk row][block][32]
  static thread_local std::vector<float> dBuf, mBuf;
  quants.resize(size_t(kChunk) * nb * 32), dBuf.resize(size_t(kChunk) * nb), mBuf.resize(size_t(kChunk) * nb);
  Unpacked u;
  int off = 0;
  for (int rc = r0; rc < r1; rc += kChunk) {
    const int rn = r1 - rc < kChunk ? r1 - rc : kChunk;
    for (int i = 0; i < rn; i++)
      for (int b = 0; b < nb; b++) {
        unpack(type, w + (size_t(rc + i) * nb + b) * bb, u);
        std::memcpy(quants.data() + (size_t(i) * nb + b) * 32, u.w, 32);
        dBuf[size_t(i) * nb + b] = u.d, mBuf[size_t(i) * nb + b] = u.dmin, off = u.off;
      }
    for (int g = 0; g < groups; g++) {
      const int8_t* xg = tlXg.data() + size_t(g) * nb * 256;
      for (int i0 = 0; i0 < rn; i0 += kRows) {
        const int nr = rn - i0 < kRows ? rn - i0 : kRows;
        const uint8_t* q[kRows];
        const float *d[kRows], *m[kRows];
        for (int k = 0; k < kRows; k++) {
          const int i = i0 + (k < nr ? k : nr - 1);  // past the chunk: its last row, dropped
          q[k] = quants.data() + size_t(i) * nb * 32, d[k] = dBuf.data() + size_t(i) * nb, m[k] = mBuf.data() + size_t(i) * nb;
        }
        __m256 acc[kRows];
        for (int k = 0; k < kRows; k++) acc[k] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
          const int8_t* xb = xg + size_t(b) * 256;
          __m256i s[kRows];
          for (int k = 0; k < kRows; k++) s[k] = _mm256_setzero_si256();
          for (int h = 0; h < 2; h++) {
            __m256i p[kRows];
            for (int k = 0; k < kRows; k++) p[k] = _mm256_setzero_si256();
            for (int j = 4 * h; j < 4 * h + 4; j++) {
              const __m256i x = load(xb + 32 * j);
              for (int k = 0; k < kRows; k++) {
                int32_t wq;
                std::memcpy(&wq, q[k] + size_t(b) * 32 + 4 * j, 4);
                p[k] = _mm256_add_epi16(p[k], _mm256_maddubs_epi16(_mm256_set1_epi32(wq), x));
              }
            }
            for (int k = 0; k < kRows; k++) s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(p[k], ones));
          }
          const __m256 dx = _mm256_loadu_ps(tlDx8[0].data() + (size_t(g) * nb + b) * 8);
          const __m256i sx = load(tlSum8.data() + (size_t(g) * nb + b) * 8);
          // Offsets 8 (Q4_0) and 16 (Q5_0): the same for every row of the type.
          const __m256i offSum = off != 0 ? _mm256_slli_epi32(sx, off == 16 ? 4 : 3) : _mm256_setzero_si256();
          for (int k = 0; k < kRows; k++) {
            __m256 term = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s[k], offSum)), _mm256_mul_ps(_mm256_set1_ps(d[k][b]), dx));
            if (legacyMin) term = _mm256_add_ps(term, _mm256_mul_ps(_mm256_set1_ps(m[k][b]), _mm256_mul_ps(dx, _mm256_cvtepi32_ps(sx))));
            acc[k] = _mm256_add_ps(acc[k], term);
          }
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

}  // namespace

void quantBatchPrepare(bool kQuant, const QuantActs& a, int cols, int T) {
  const int be = kQuant ? 256 : 32, nb = cols / be, groups = (T + 7) / 8;
  tlDx8[kQuant].assign(size_t(groups) * nb * 8, 0.0f);
  if (!kQuant) tlSum8.assign(size_t(groups) * nb * 8, 0), tlXg.assign(size_t(groups) * nb * 256, 0);
  for (int t = 0; t < T; t++)
    for (int b = 0; b < nb; b++) {
      const size_t at = (size_t(t / 8) * nb + b) * 8 + t % 8;
      tlDx8[kQuant][at] = a.xd[size_t(t) * nb + b];
      if (kQuant) continue;
      tlSum8[at] = a.xsum[size_t(t) * nb + b];
      int8_t* d = tlXg.data() + (size_t(t / 8) * nb + b) * 256 + (t % 8) * 4;
      for (int j = 0; j < 8; j++) std::memcpy(d + j * 32, a.xs.data() + size_t(t) * cols + b * 32 + j * 4, 4);
    }
}

void quantRowsBatched(int typeCode, const uint8_t* w, int wRows, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1) {
  const int type = baseType(typeCode);
  if (type >= kTypeQ2_K && type <= kTypeQ6_K) rowsK(type, w, rows8Tiled(typeCode, wRows), a, out, rows, cols, T, r0, r1);
  else rowsLegacy(type, w, out, rows, cols, T, r0, r1);
}

#endif

}  // namespace ls
