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

// One block unpacked: signed weights as the integer dot uses them, sub-block scales and mins.
struct Unpacked {
  alignas(64) int8_t w[256];
  int32_t sc[16], mn[16];
  int32_t mnPair[8], scPair[8];  // mins / scales of sub-blocks 2j (low i16) and 2j + 1 (high i16)
  int off;                       // the type's quant offset: weight = q − off
  float d, dmin;
};

inline float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  uint32_t em = uint32_t(h & 0x7fff) << 13, bits;
  float f;
  std::memcpy(&f, &em, 4);
  f *= 5.192296858534828e33f;  // 2^112, as halfToFloatExact
  std::memcpy(&bits, &f, 4);
  bits |= uint32_t(h & 0x8000) << 16;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store(int8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i srl16(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }

// Layouts: ggml-common.h; meaning of the bits: shards/quant-blocks.ts unpackBlock (the SIMD
// forms are those of quant-dot.cc's decode kernels). u.w gets the raw quants, u.off the offset.
int unpack(int type, const uint8_t* blk, Unpacked& u) {
  int subLen = 16;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  switch (type) {
    case kTypeQ4_K:
    case kTypeQ5_K: {
      const bool five = type == kTypeQ5_K;
      u.off = 0;
      const uint8_t* s = blk + 4;
      for (int j = 0; j < 4; j++) u.sc[j] = s[j] & 63, u.mn[j] = s[j + 4] & 63;
      for (int j = 4; j < 8; j++) u.sc[j] = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4), u.mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      const uint8_t* qs = blk + (five ? 48 : 16);
      const __m256i hb = five ? load(blk + 16) : _mm256_setzero_si256();
      for (int k = 0; k < 4; k++) {
        const __m256i qv = load(qs + 32 * k);
        __m256i lo = _mm256_and_si256(qv, m4), hi = _mm256_and_si256(srl16(qv, 4), m4);
        if (five) {
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(srl16(hb, 2 * k), one), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(srl16(hb, 2 * k + 1), one), 4));
        }
        store(u.w + 64 * k, lo);
        store(u.w + 64 * k + 32, hi);
      }
      u.d = half(blk), u.dmin = half(blk + 2);
      return 32;
    }
    case kTypeQ6_K: {
      for (int j = 0; j < 16; j++) u.sc[j] = int8_t(blk[192 + j]), u.mn[j] = 0;
      u.off = 32;
      for (int n = 0; n < 2; n++) {
        const __m256i a = load(blk + 64 * n), c = load(blk + 64 * n + 32), h = load(blk + 128 + 32 * n);
        store(u.w + 128 * n, _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)));
        store(u.w + 128 * n + 32,
              _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_slli_epi16(_mm256_and_si256(srl16(h, 2), m2), 4)));
        store(u.w + 128 * n + 64,
              _mm256_or_si256(_mm256_and_si256(srl16(a, 4), m4), _mm256_slli_epi16(_mm256_and_si256(srl16(h, 4), m2), 4)));
        store(u.w + 128 * n + 96,
              _mm256_or_si256(_mm256_and_si256(srl16(c, 4), m4), _mm256_slli_epi16(_mm256_and_si256(srl16(h, 6), m2), 4)));
      }
      u.d = half(blk + 208), u.dmin = 0;
      return 16;
    }
    case kTypeQ3_K: {
      const uint8_t* s = blk + 96;
      for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
        u.sc[j] = (lo | (((s[8 + (j & 3)] >> (2 * (j >> 2))) & 3) << 4)) - 32, u.mn[j] = 0;
      }
      for (int n = 0; n < 2; n++)
        for (int j = 0; j < 4; j++)
          for (int l = 0; l < 32; l++)
            u.w[128 * n + 32 * j + l] = int8_t(((blk[32 + 32 * n + l] >> (2 * j)) & 3) | (((blk[l] >> (4 * n + j)) & 1) << 2));
      u.off = 4;  // low − 4·(1 − high) = (low + 4·high) − 4
      u.d = half(blk + 108), u.dmin = 0;
      break;
    }
    case kTypeQ2_K: {
      for (int j = 0; j < 16; j++) u.sc[j] = blk[j] & 0xf, u.mn[j] = blk[j] >> 4;
      for (int n = 0; n < 2; n++)
        for (int j = 0; j < 4; j++)
          for (int l = 0; l < 32; l++) u.w[128 * n + 32 * j + l] = int8_t((blk[16 + 32 * n + l] >> (2 * j)) & 3);
      u.off = 0;
      u.d = half(blk + 80), u.dmin = half(blk + 82);
      break;
    }
    default: {  // legacy: one sub-block of 32, scale 1
      const bool five = type == kTypeQ5_0 || type == kTypeQ5_1, withMin = type == kTypeQ4_1 || type == kTypeQ5_1;
      const int qsAt = (withMin ? 4 : 2) + (five ? 4 : 0);
      const int offset = withMin ? 0 : five ? 16 : 8;
      const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + qsAt));
      __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), m4);
      if (five) {
        uint32_t qh;
        std::memcpy(&qh, blk + qsAt - 4, 4);
        const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)),
                                                   _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
        const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
        q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10)));
      }
      store(u.w, q);
      u.off = offset;
      u.sc[0] = 1, u.mn[0] = 0;
      u.d = half(blk), u.dmin = withMin ? half(blk + 2) : 0;
      subLen = 32;
      break;
    }
  }
  return subLen;
}

// Scales and mins in i16 pairs (sub-blocks 2j low, 2j + 1 high) for vpdpwssd.
void pairUp(Unpacked& u, int nsub) {
  for (int j = 0; j < nsub / 2; j++) {
    u.mnPair[j] = int32_t(uint32_t(u.mn[2 * j] & 0xffff) | (uint32_t(u.mn[2 * j + 1]) << 16));
    u.scPair[j] = int32_t(uint32_t(u.sc[2 * j] & 0xffff) | (uint32_t(u.sc[2 * j + 1]) << 16));
  }
}

int blockBytes(int type) { return int(quantRowBytes(type, type >= kTypeQ2_K && type <= kTypeQ6_K ? 256 : 32)); }

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

void quantRowsBatched(int typeCode, const uint8_t* w, int wRows, float* out, int rows, int cols, int T, int r0, int r1) {
  const int type = baseType(typeCode), tiled = rows8Tiled(typeCode, wRows);
  if (type >= kTypeQ2_K && type <= kTypeQ6_K) rowsBatched<8>(type, w, tiled, out, rows, cols, T, r0, r1);
  else rowsBatched<4>(type, w, tiled, out, rows, cols, T, r0, r1);
}

#else
bool quantBatchAvailable() { return false; }
void quantBatchPrepare(bool, const QuantActs&, int, int) {}
void quantRowsBatched(int, const uint8_t*, int, float*, int, int, int, int, int) {}
#endif

}  // namespace ls
