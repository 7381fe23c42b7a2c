// One GGUF block unpacked to raw unsigned quants (natural element order), integer sub-block
// scales and mins, for the batched kernels (quant-batch.cc: AVX512-VNNI; quant-batch-avx2.cc).
// Layouts: ggml-common.h; meaning of the bits: shards/quant-blocks.ts unpackBlock.
#pragma once
#if defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "half-exact.h"
#include "quant-dot.h"

namespace ls {
namespace qunpack {

// One block unpacked: signed weights as the integer dot uses them, sub-block scales and mins.
struct Unpacked {
  alignas(64) int8_t w[256];
  int32_t sc[16], mn[16];
  int32_t mnPair[8], scPair[8];  // mins / scales of sub-blocks 2j (low i16) and 2j + 1 (high i16)
  int off;                       // the type's quant offset: weight = q − off
  float d, dmin;
};

inline float half(const uint8_t* p) { return halfBitsToFloat(p); }

inline __m256i load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store(int8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i srl16(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }

// Layouts: ggml-common.h; meaning of the bits: shards/quant-blocks.ts unpackBlock (the SIMD
// forms are those of quant-dot.cc's decode kernels). u.w gets the raw quants, u.off the offset.
inline int unpack(int type, const uint8_t* blk, Unpacked& u) {
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
inline void pairUp(Unpacked& u, int nsub) {
  for (int j = 0; j < nsub / 2; j++) {
    u.mnPair[j] = int32_t(uint32_t(u.mn[2 * j] & 0xffff) | (uint32_t(u.mn[2 * j + 1]) << 16));
    u.scPair[j] = int32_t(uint32_t(u.sc[2 * j] & 0xffff) | (uint32_t(u.sc[2 * j + 1]) << 16));
  }
}

inline int blockBytes(int type) { return int(quantRowBytes(type, type >= kTypeQ2_K && type <= kTypeQ6_K ? 256 : 32)); }

}  // namespace qunpack
}  // namespace ls
#endif
