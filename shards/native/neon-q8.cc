// Q8_0 matmuls on Arm NEON (issue 40: Apple Silicon, Raspberry Pi, Graviton, Ampere), decode
// (T < 8) and batched, with the canonical arithmetic of decode.cc / matmul.cc: per (row, token,
// block) the exact integer sum of 32 int8 products, then sumf = sumf + f32(isum)·(dw·dx) in
// block order. Integer sums use SDOT (vdotq_s32) where the CPU has the dotprod extension, else
// widening multiplies (vmull_s8) and pairwise accumulation, both exact. The float steps run 4
// lanes wide over independent chains (4 rows in decode, 4 tokens in batches), never reordering
// one: vmulq and vaddq separately (no fused multiply-add; built with -ffp-contract=off).
// Correctness is checked under qemu-user by shards/native/neon-check.cc; speed is not measured.
#if defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>
#include <vector>

#include "half-exact.h"
#include "matmul.h"

namespace ls {

namespace {

inline float halfBits(const uint8_t* p) { return halfBitsToFloat(p); }

// Σ w·x over one block of 32 (exact: |products| ≤ 128·128, 32 of them fit i32 easily).
inline int32_t dot32(const int8_t* w, const int8_t* x) {
  const int8x16_t w0 = vld1q_s8(w), w1 = vld1q_s8(w + 16), x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
#if defined(__ARM_FEATURE_DOTPROD)
  return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1));
#else
  int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)));
  s = vpadalq_s16(s, vmull_s8(vget_high_s8(w0), vget_high_s8(x0)));
  s = vpadalq_s16(s, vmull_s8(vget_low_s8(w1), vget_low_s8(x1)));
  s = vpadalq_s16(s, vmull_s8(vget_high_s8(w1), vget_high_s8(x1)));
  return vaddvq_s32(s);
#endif
}

thread_local std::vector<int8_t> tlXs;   // decodeQ8's int8 copy, and the batched kernels' [Tpad][cols]
thread_local std::vector<float> tlDx;    // batched: [group of 4][block][4 tokens]
thread_local std::vector<int32_t> tlXsum;

}  // namespace

int decodeQ8Bias() { return 0; }

void decodeQ8(const uint8_t* w, const int16_t* xq, const float* xd, float* out, int rows, int cols, int T, int r0, int r1) {
  tlXs.resize(size_t(T) * cols);
  for (size_t i = 0; i < size_t(T) * cols; i++) tlXs[i] = int8_t(xq[i]);
  tlXsum.assign(size_t(T) * (cols / 32), 0);
  decodeQ8Prepared(w, tlXs.data(), tlXsum.data(), xd, out, rows, cols, T, r0, r1);
}

void decodeQ8Prepared(const uint8_t* w, const int8_t* xsAll, const int32_t*, const float* xd, float* out, int rows, int cols, int T, int r0, int r1) {
  const int nb = cols / 32;
  const size_t rb = size_t(nb) * 34;
  for (int r = r0; r < r1; r += 4) {
    const int nr = r1 - r < 4 ? r1 - r : 4;
    const uint8_t* wr[4];
    for (int i = 0; i < 4; i++) wr[i] = w + size_t(r + (i < nr ? i : 0)) * rb;  // past the share: row r, dropped
    for (int t = 0; t < T; t++) {
      const int8_t* xs = xsAll + size_t(t) * cols;
      float32x4_t acc = vdupq_n_f32(0);
      for (int b = 0; b < nb; b++) {
        alignas(16) int32_t is[4];
        alignas(16) float dw[4];
        for (int i = 0; i < 4; i++) {
          const uint8_t* blk = wr[i] + size_t(b) * 34;
          is[i] = dot32(reinterpret_cast<const int8_t*>(blk + 2), xs + b * 32);
          dw[i] = halfBits(blk);
        }
        const float32x4_t d = vmulq_f32(vld1q_f32(dw), vdupq_n_f32(xd[size_t(t) * nb + b]));
        acc = vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(vld1q_s32(is)), d));
      }
      alignas(16) float lanes[4];
      vst1q_f32(lanes, acc);
      for (int i = 0; i < nr; i++) out[size_t(t) * rows + r + i] = lanes[i];
    }
  }
}

void matmulQ8PrepareNeon(const int8_t* xs, const int16_t* xq, const float* xd, int cols, int T) {
  const int nb = cols / 32, groups = (T + 3) / 4;
  tlXs.assign(size_t(groups) * 4 * cols, 0);
  for (size_t i = 0; i < size_t(T) * cols; i++) tlXs[i] = xs ? xs[i] : int8_t(xq[i]);
  tlDx.assign(size_t(groups) * nb * 4, 0.0f);
  for (int t = 0; t < T; t++)
    for (int b = 0; b < nb; b++) tlDx[(size_t(t / 4) * nb + b) * 4 + t % 4] = xd[size_t(t) * nb + b];
}

void matmulQ8RowsNeon(const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1) {
  const int nb = cols / 32, groups = (T + 3) / 4;
  const size_t rb = size_t(nb) * 34;
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = w + size_t(r) * rb;
    for (int g = 0; g < groups; g++) {
      const int8_t* xg = tlXs.data() + size_t(g) * 4 * cols;
      const float* dg = tlDx.data() + size_t(g) * nb * 4;
      float32x4_t acc = vdupq_n_f32(0);
      for (int b = 0; b < nb; b++) {
        const int8_t* wb = reinterpret_cast<const int8_t*>(row + size_t(b) * 34 + 2);
        alignas(16) int32_t is[4];
        for (int t = 0; t < 4; t++) is[t] = dot32(wb, xg + size_t(t) * cols + b * 32);
        const float32x4_t d = vmulq_f32(vdupq_n_f32(halfBits(row + size_t(b) * 34)), vld1q_f32(dg + size_t(b) * 4));
        acc = vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(vld1q_s32(is)), d));
      }
      alignas(16) float lanes[4];
      vst1q_f32(lanes, acc);
      for (int tt = 0; tt < 4 && g * 4 + tt < T; tt++) out[size_t(g * 4 + tt) * rows + r] = lanes[tt];
    }
  }
}

}  // namespace ls
#endif
