// Elementwise ops of a Llama block, bit-identical to the host-side code they replace:
// rmsnorm, RoPE and SwiGLU as shards/kernels-ref.ts computes them (float64 math, rounded to
// f32 where the TypeScript stores into a Float32Array), Q8_0 activation quantization and
// attention as shards/asm/ (f32 lanes in the same order). Built with -ffp-contract=off.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ls {

/** V8's Math.exp (fdlibm __ieee754_exp with V8's exp(1) special case), bit for bit. */
double jsExp(double x);

/** out[n] = x / rms(x) * weight, one row, as kernels-ref.ts rmsnorm. */
void rmsnormRow(float* out, const float* x, const float* weight, int n, double eps);

/** shards/asm/matmul-q8.ts quantizeQ8 of one row: int8 quants, scales (f16-rounded), Σq per block × bias. */
void quantizeRowQ8(const float* x, int8_t* xs, float* xd, int32_t* xsumBias, int cols, int bias);

/** IEEE half (round to nearest even, as shards/f16.ts f32ToF16) and back. */
uint16_t floatToHalf(float f);
float halfToFloatExact(uint16_t h);

/**
 * One (token, head) of causal attention as shards/asm/attention.ts head(): q and out [hd],
 * k/v rows `len` long with `rowElems` elements between rows (f32, or f16 when `half`).
 * `att` holds at least len rounded up to 4 floats.
 */
void attentionHead(const float* q, const void* k, const void* v, bool half, float* out, int len, int rowElems, int hd, float* att);

}  // namespace ls
