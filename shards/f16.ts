/**
 * IEEE 754 binary16 conversion. Decoding is exact; encoding rounds to nearest even
 * (as numpy and ggml's FP32_TO_FP16), so f32 -> f16 -> f32 is reproducible everywhere.
 * The one f16 module: the engine's kernels and the wire codecs (protocol/tensor-codec.ts) share it.
 * A leaf: it imports nothing, so protocol/ may import it (docs/design.md §1).
 */
const F16_TO_F32 = new Float32Array(65536)
for (let h = 0; h < 65536; h++) {
  const sign = h & 0x8000 ? -1 : 1
  const exp = (h >> 10) & 0x1f
  const frac = h & 0x3ff
  let v: number
  if (exp === 0) v = frac * 2 ** -24
  else if (exp === 31) v = frac === 0 ? Number.POSITIVE_INFINITY : Number.NaN
  else v = (1 + frac / 1024) * 2 ** (exp - 15)
  F16_TO_F32[h] = sign * v
}

export function f16ToF32(h: number): number {
  return F16_TO_F32[h & 0xffff]
}

/** The 65536-entry decode table, for kernels that convert whole rows. */
export function f16Table(): Float32Array {
  return F16_TO_F32
}

const f32Buf = new Float32Array(1)
const u32Buf = new Uint32Array(f32Buf.buffer)

/** f32 -> f16 bits, round to nearest even (numpy, ggml's FP32_TO_FP16); overflow gives ±Inf. */
export function f32ToF16(value: number): number {
  f32Buf[0] = value
  const x = u32Buf[0]
  const sign = (x >>> 16) & 0x8000
  const exp = (x >>> 23) & 0xff
  let mant = x & 0x7fffff
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0)
  const e = exp - 112 // rebias 127 -> 15
  if (e >= 31) return sign | 0x7c00
  if (e <= 0) {
    // subnormal f16: value = half * 2^-24
    if (e < -10) return sign
    mant |= 0x800000
    const shift = 14 - e
    let half = mant >>> shift
    const rem = mant & ((1 << shift) - 1)
    const halfway = 1 << (shift - 1)
    if (rem > halfway || (rem === halfway && (half & 1) === 1)) half++
    return sign | half
  }
  let half = (e << 10) | (mant >>> 13)
  const rem = mant & 0x1fff
  // a carry out of the mantissa correctly bumps the exponent (up to 0x7c00 = Inf)
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++
  return sign | half
}
