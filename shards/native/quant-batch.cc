// Batched (prefill) matmuls on the block types of quant-dot.cc, 16 tokens per 512-bit vector,
// with the canonical arithmetic of shards/kernels-ref-exact-quant.ts (same bits as the decode
// kernels): the int8 activations are regrouped as xs[token group][block][4-byte group][16
// tokens][4]; a row is unpacked once into its raw unsigned quants (before any offset: ≤ 63) and
// integer sub-block scales, and vpdpbusd of a broadcast group of 4 quants (the u8 operand)
// against the activations (s8) gives Σq·x per token lane. A type's constant offset (Q6_K's 32,
// Q3_K's 4, Q4_0's 8, Q5_0's 16) comes back out exactly as offset·Σ sc·Σx from the activation
// sums. Sub-block sums times their scales and the mins term stay exact integers; the per-block
// float steps then run per token lane in block order, so lane t is exactly token t's canonical
// chain.
#include <cstring>
#include <vector>

#include "quant-dot.h"
#include "quant-internal.h"
#include "quant-unpack.h"
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#define LS_QBATCH 1
#endif

namespace ls {

#ifdef LS_QBATCH

bool quantBatchAvailable() { return true; }

namespace {

thread_local std::vector<int8_t> tlXu;     // [group][block][dword][16][4]
thread_local std::vector<float> tlDx;      // [group][block][16]
thread_local std::vector<int32_t> tlSum;   // [group][block][sums per block][16]: Σq per 16 (K) or per 32 (legacy)
// K only, for the mins term through vpdpwssd: [group][block][pair][16] i32 lanes holding two
// i16 activation sums (low, high): Σq per 16 of sub-blocks 2j, 2j + 1 (8 pairs), and Σq per 32
// of sub-blocks 2j, 2j + 1 (4 pairs). |Σ| ≤ 32·127 fits i16.
thread_local std::vector<int32_t> tlPair16, tlPair32;
thread_local int tlSumsPerBlock = 0;

using namespace qunpack;  // Unpacked, unpack, pairUp, blockBytes, load (quant-unpack.h)


}  // namespace

void quantBatchPrepare(bool kQuant, const QuantActs& a, int cols, int T) {
  const int be = kQuant ? 256 : 32, nb = cols / be, dw = be / 4;
  const int sums = kQuant ? 16 : 1;
  const int groups = (T + 15) / 16;
  tlSumsPerBlock = sums;
  tlXu.assign(size_t(groups) * nb * dw * 64, 0);
  tlDx.assign(size_t(groups) * nb * 16, 0.0f);
  tlSum.assign(size_t(groups) * nb * sums * 16, 0);
  if (kQuant) tlPair16.assign(size_t(groups) * nb * 8 * 16, 0), tlPair32.assign(size_t(groups) * nb * 4 * 16, 0);
  for (int t = 0; t < T; t++) {
    const int g = t / 16, lane = t % 16;
    const int8_t* q = a.xs.data() + size_t(t) * cols;
    for (int b = 0; b < nb; b++) {
      int8_t* dst = tlXu.data() + ((size_t(g) * nb + b) * dw) * 64 + lane * 4;
      for (int k = 0; k < dw; k++) std::memcpy(dst + size_t(k) * 64, q + b * be + k * 4, 4);
      tlDx[(size_t(g) * nb + b) * 16 + lane] = a.xd[size_t(t) * nb + b];
      const int32_t* xsum = a.xsum.data() + (size_t(t) * nb + b) * sums;
      for (int s = 0; s < sums; s++) tlSum[((size_t(g) * nb + b) * sums + s) * 16 + lane] = xsum[s];
      if (!kQuant) continue;
      for (int j = 0; j < 8; j++)
        tlPair16[((size_t(g) * nb + b) * 8 + j) * 16 + lane] = int32_t(uint32_t(xsum[2 * j] & 0xffff) | (uint32_t(xsum[2 * j + 1]) << 16));
      for (int j = 0; j < 4; j++) {
        const int lo = xsum[4 * j] + xsum[4 * j + 1], hi = xsum[4 * j + 2] + xsum[4 * j + 3];
        tlPair32[((size_t(g) * nb + b) * 4 + j) * 16 + lane] = int32_t(uint32_t(lo & 0xffff) | (uint32_t(hi) << 16));
      }
    }
  }
}

namespace {

// Rows are taken kRows at a time, so each activation vector loaded from L2 feeds kRows
// independent vpdpbusd chains (one load per kRows multiply-adds; rows past r1 repeat the last
// row and are dropped): 8 for the K-quants, 4 for the legacy types, whose unpacked tile of
// 32-blocks would otherwise outgrow L1.
template <int kRows>
void rowsBatched(int type, const uint8_t* w, int tiled, float* out, int rows, int cols, int T, int r0, int r1) {
  const bool kQuant = type >= kTypeQ2_K && type <= kTypeQ6_K;
  const bool withMin = type == kTypeQ2_K || type == kTypeQ4_K || type == kTypeQ5_K;
  const bool legacyMin = type == kTypeQ4_1 || type == kTypeQ5_1;
  const int be = kQuant ? 256 : 32, nb = cols / be, dw = be / 4, bb = blockBytes(type);
  const int groups = (T + 15) / 16, sums = tlSumsPerBlock;
  // This thread's unpacked rows, kept between calls (no allocation or zeroing per share).
  static thread_local std::vector<Unpacked> tileBuf;
  if (tileBuf.size() < size_t(nb) * kRows) tileBuf.resize(size_t(nb) * kRows);
  Unpacked* tile = tileBuf.data();
  int subLen = 32;
  for (int r = r0; r < r1; r += kRows) {
    const int nr = r1 - r < kRows ? r1 - r : kRows;
    for (int i = 0; i < kRows; i++) {
      const int rr = r + (i < nr ? i : nr - 1);
      for (int b = 0; b < nb; b++) {
        Unpacked& u = tile[size_t(b) * kRows + i];
        // Plain or rows8 (quant-layout.h): the same block bytes, found through rowStart.
        subLen = unpack(type, rowStart(w, tiled, size_t(nb) * bb, bb, rr) + size_t(b) * blockStride(tiled, rr) * bb, u);
        pairUp(u, be / subLen);
      }
    }
    const int nsub = be / subLen, dwSub = subLen / 4;
    for (int g = 0; g < groups; g++) {
      __m512 acc[kRows];
      for (int i = 0; i < kRows; i++) acc[i] = _mm512_setzero_ps();
      for (int b = 0; b < nb; b++) {
        const Unpacked* u = tile + size_t(b) * kRows;
        const int8_t* xb = tlXu.data() + ((size_t(g) * nb + b) * dw) * 64;
        const int32_t* sb = tlSum.data() + (size_t(g) * nb + b) * sums * 16;
        __m512i sumi[kRows], summ[kRows];
        for (int i = 0; i < kRows; i++) sumi[i] = summ[i] = _mm512_setzero_si512();
        for (int s = 0; s < nsub; s++) {
          __m512i t[kRows];
          for (int i = 0; i < kRows; i++) t[i] = _mm512_setzero_si512();
          for (int k = s * dwSub; k < (s + 1) * dwSub; k++) {
            const __m512i x = _mm512_loadu_si512(xb + size_t(k) * 64);
            for (int i = 0; i < kRows; i++) {
              int32_t wk;
              std::memcpy(&wk, u[i].w + 4 * k, 4);
              t[i] = _mm512_dpbusd_epi32(t[i], _mm512_set1_epi32(wk), x);
            }
          }
          for (int i = 0; i < kRows; i++)
            sumi[i] = kQuant ? _mm512_add_epi32(sumi[i], _mm512_mullo_epi32(t[i], _mm512_set1_epi32(u[i].sc[s]))) : t[i];
        }
        if (u[0].off != 0) {
          // The offset back out: off·Σ sc·Σx over the sub-blocks (K: per-16 sums, two sub-blocks per
          // vpdpwssd; legacy: the block's one sum, scale 1). The offset is the type's, every row alike.
          const __m512i off = _mm512_set1_epi32(u[0].off);
          if (kQuant) {
            for (int i = 0; i < kRows; i++) {
              __m512i corr = _mm512_setzero_si512();
              for (int j = 0; j < nsub / 2; j++)
                corr = _mm512_dpwssd_epi32(corr, _mm512_loadu_si512(tlPair16.data() + ((size_t(g) * nb + b) * 8 + j) * 16), _mm512_set1_epi32(u[i].scPair[j]));
              sumi[i] = _mm512_sub_epi32(sumi[i], _mm512_mullo_epi32(corr, off));
            }
          } else {
            const __m512i sx = _mm512_mullo_epi32(_mm512_loadu_si512(sb), off);
            for (int i = 0; i < kRows; i++) sumi[i] = _mm512_sub_epi32(sumi[i], sx);
          }
        }
        if (withMin) {
          // Σ mn·Σqx over the sub-blocks, two per vpdpwssd (activation sums and mins in i16 pairs).
          const int32_t* pairs = (subLen == 32 ? tlPair32.data() + (size_t(g) * nb + b) * 4 * 16 : tlPair16.data() + (size_t(g) * nb + b) * 8 * 16);
          for (int j = 0; j < nsub / 2; j++) {
            const __m512i bs = _mm512_loadu_si512(pairs + size_t(j) * 16);
            for (int i = 0; i < kRows; i++) summ[i] = _mm512_dpwssd_epi32(summ[i], bs, _mm512_set1_epi32(u[i].mnPair[j]));
          }
        }
        const __m512 dx = _mm512_loadu_ps(tlDx.data() + (size_t(g) * nb + b) * 16);
        for (int i = 0; i < kRows; i++) {
          __m512 term;
          if (kQuant) {
            term = _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(u[i].d)), _mm512_cvtepi32_ps(sumi[i]));
            if (withMin)
              term = _mm512_sub_ps(term, _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(u[i].dmin)), _mm512_cvtepi32_ps(summ[i])));
          } else {
            term = _mm512_mul_ps(_mm512_cvtepi32_ps(sumi[i]), _mm512_mul_ps(_mm512_set1_ps(u[i].d), dx));
            if (legacyMin)
              term = _mm512_add_ps(term, _mm512_mul_ps(_mm512_set1_ps(u[i].dmin), _mm512_mul_ps(dx, _mm512_cvtepi32_ps(_mm512_loadu_si512(sb)))));
          }
          acc[i] = _mm512_add_ps(acc[i], term);
        }
      }
      for (int i = 0; i < nr; i++) {
        alignas(64) float lanes[16];
        _mm512_store_ps(lanes, acc[i]);
        for (int tt = 0; tt < 16 && g * 16 + tt < T; tt++) out[size_t(g * 16 + tt) * rows + r + i] = lanes[tt];
      }
    }
  }
}

}  // namespace

void quantRowsBatched(int typeCode, const uint8_t* w, int wRows, const QuantActs&, float* out, int rows, int cols, int T, int r0, int r1) {
  const int type = baseType(typeCode), tiled = rows8Tiled(typeCode, wRows);
  if (type >= kTypeQ2_K && type <= kTypeQ6_K) rowsBatched<8>(type, w, tiled, out, rows, cols, T, r0, r1);
  else rowsBatched<4>(type, w, tiled, out, rows, cols, T, r0, r1);
}

#elif !defined(__AVX2__)
// Generic builds: no batched kernels (AVX2 builds take quant-batch-avx2.cc's).
bool quantBatchAvailable() { return false; }
void quantBatchPrepare(bool, const QuantActs&, int, int) {}
void quantRowsBatched(int, const uint8_t*, int, const QuantActs&, float*, int, int, int, int, int) {}
#endif

}  // namespace ls
