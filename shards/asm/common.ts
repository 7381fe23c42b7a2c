// Shared helpers of the AssemblyScript kernels (compiled by `npm run build:wasm`, not by tsc).
// Canonical orders live here so every kernel (and the native addon, shards/native/) sums the same way.

/** Byte offset of the argument block the host writes before each call (see shards/kernels/wasm/layout.ts). */
export const ARGS: usize = 256

/** Horizontal sum of an f32x4 accumulator in the fixed order (l0 + l1) + (l2 + l3). */
@inline
export function hsum(a: v128): f32 {
  return (f32x4.extract_lane(a, 0) + f32x4.extract_lane(a, 1)) + (f32x4.extract_lane(a, 2) + f32x4.extract_lane(a, 3))
}

/** Exact integer horizontal sum. */
@inline
export function hsumI(a: v128): i32 {
  return i32x4.extract_lane(a, 0) + i32x4.extract_lane(a, 1) + i32x4.extract_lane(a, 2) + i32x4.extract_lane(a, 3)
}

// 2^112 as f32: rebases an f16 exponent (bias 15) shifted into f32 position onto bias 127.
const F16_REBASE: u32 = 0x77800000

/**
 * IEEE half bit patterns (one per i32 lane) to f32. Exact for every finite half, subnormals
 * included (the classic shift-and-multiply conversion); inf/NaN halves are not supported.
 */
@inline
export function halfToFloat4(h: v128): v128 {
  const sign = i32x4.shl(v128.and(h, i32x4.splat(0x8000)), 16)
  const em = i32x4.shl(v128.and(h, i32x4.splat(0x7fff)), 13)
  return v128.or(f32x4.mul(em, f32x4.splat(reinterpret<f32>(F16_REBASE))), sign)
}

@inline
export function halfToFloat(h: u32): f32 {
  const f = reinterpret<f32>((h & 0x7fff) << 13) * reinterpret<f32>(F16_REBASE)
  return reinterpret<f32>(reinterpret<u32>(f) | ((h & 0x8000) << 16))
}

/** f32 to half, round to nearest even (same as shards/f16.ts f32ToF16 and ggml FP32_TO_FP16). */
export function floatToHalf(value: f32): u32 {
  const x = reinterpret<u32>(value)
  const sign = (x >>> 16) & 0x8000
  const exp = <i32>((x >>> 23) & 0xff)
  let mant = x & 0x7fffff
  if (exp == 0xff) return sign | 0x7c00 | (mant != 0 ? 0x200 : 0)
  const e = exp - 127 + 15
  if (e >= 31) return sign | 0x7c00
  if (e <= 0) {
    if (e < -10) return sign
    mant |= 0x800000
    const shift = <u32>(14 - e)
    let half = mant >>> shift
    const rem = mant & ((1 << shift) - 1)
    const halfway: u32 = 1 << (shift - 1)
    if (rem > halfway || (rem == halfway && (half & 1) == 1)) half++
    return sign | half
  }
  let half = (<u32>e << 10) | (mant >>> 13)
  const rem = mant & 0x1fff
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1) == 1)) half++
  return sign | half
}

/**
 * Rows [r0, r1) of `rows` for thread `tid` of `n`: contiguous, 4-aligned chunks. Any split gives
 * the same bits because every output element is computed by the same code path on any thread.
 */
@inline
export function chunkStart(rows: i32, tid: i32, n: i32): i32 {
  const per = ((rows + n - 1) / n + 3) & ~3
  return min(rows, tid * per)
}

@inline
export function chunkEnd(rows: i32, tid: i32, n: i32): i32 {
  const per = ((rows + n - 1) / n + 3) & ~3
  return min(rows, (tid + 1) * per)
}

@inline
export function arg(i: i32): i32 {
  return load<i32>(ARGS + (<usize>i << 2))
}
