// Unpacks one GGUF block (ggml-common.h block_q4_0 … block_q6_K) into what the dot products
// use, as shards/quant/quant-blocks.ts unpackBlock defines it: 16-bit integer quants with the type's
// offset applied (Q4_0's −8, Q6_K's −32, Q3_K's −4·!h …), integer sub-block scales and mins,
// and the block's float scales. Integers only, so SIMD and scalar unpacking give the same values.
import { halfToFloat } from './common'

export const TYPE_Q4_0: i32 = 2
export const TYPE_Q4_1: i32 = 3
export const TYPE_Q5_0: i32 = 6
export const TYPE_Q5_1: i32 = 7
export const TYPE_Q2_K: i32 = 10
export const TYPE_Q3_K: i32 = 11
export const TYPE_Q4_K: i32 = 12
export const TYPE_Q5_K: i32 = 13
export const TYPE_Q6_K: i32 = 14
export const TYPE_BF16: i32 = 30

/** Per-thread unpack area (bytes): 256 i16 quants, then 16 i32 scales, then 16 i32 mins. */
export const UNPACK_BYTES: usize = 1024
export const SCALES: usize = 512
export const MINS: usize = 576

// The block's float scales (module globals are per instance, i.e. per thread).
export let blockD: f32 = 0
export let blockDmin: f32 = 0

@inline
function half(p: usize): f32 {
  return halfToFloat(<u32>load<u16>(p))
}

/** Sixteen i8 lanes to 16 i16 quants at dst. */
@inline
function store16(dst: usize, v: v128): void {
  v128.store(dst, i16x8.extend_low_i8x16_s(v))
  v128.store(dst + 16, i16x8.extend_high_i8x16_s(v))
}

export function blockElems(type: i32): i32 {
  return type == TYPE_Q4_0 || type == TYPE_Q4_1 || type == TYPE_Q5_0 || type == TYPE_Q5_1 ? 32 : 256
}

export function blockBytes(type: i32): usize {
  switch (type) {
    case TYPE_Q4_0: return 18
    case TYPE_Q4_1: return 20
    case TYPE_Q5_0: return 22
    case TYPE_Q5_1: return 24
    case TYPE_Q2_K: return 84
    case TYPE_Q3_K: return 110
    case TYPE_Q4_K: return 144
    case TYPE_Q5_K: return 176
    case TYPE_Q6_K: return 210
  }
  return 0
}

/** Unpack the block at `b` into the area `u` (UNPACK_BYTES) and blockD / blockDmin. */
export function unpack(type: i32, b: usize, u: usize): void {
  if (type == TYPE_Q4_0 || type == TYPE_Q4_1) unpackQ4(type, b, u)
  else if (type == TYPE_Q5_0 || type == TYPE_Q5_1) unpackQ5(type, b, u)
  else if (type == TYPE_Q4_K || type == TYPE_Q5_K) unpackQ45K(type, b, u)
  else if (type == TYPE_Q6_K) unpackQ6K(b, u)
  else if (type == TYPE_Q3_K) unpackQ3K(b, u)
  else unpackQ2K(b, u)
}

// Q4_0 / Q4_1: q[j] = low nibble of byte j, q[j + 16] = its high nibble (Q4_0: minus 8).
function unpackQ4(type: i32, b: usize, u: usize): void {
  const withMin = type == TYPE_Q4_1
  blockD = half(b)
  blockDmin = withMin ? half(b + 2) : 0
  const v = v128.load(b + (withMin ? 4 : 2))
  const off = i8x16.splat(withMin ? 0 : 8)
  store16(u, i8x16.sub(v128.and(v, i8x16.splat(0x0f)), off))
  store16(u + 32, i8x16.sub(i8x16.shr_u(v, 4), off))
}

// Q5_0 / Q5_1: as Q4 with bit j (j + 16) of the 32-bit qh plane as the fifth bit (Q5_0: minus 16).
function unpackQ5(type: i32, b: usize, u: usize): void {
  const withMin = type == TYPE_Q5_1
  blockD = half(b)
  blockDmin = withMin ? half(b + 2) : 0
  const o = b + (withMin ? 4 : 2)
  const qh = load<u32>(o)
  const qs = o + 4
  const off: i32 = withMin ? 0 : 16
  for (let j = 0; j < 16; j++) {
    const v = <i32>load<u8>(qs + j)
    store<i16>(u + (<usize>j << 1), <i16>(((v & 0xf) | (((qh >>> j) & 1) << 4)) - off))
    store<i16>(u + (<usize>(j + 16) << 1), <i16>(((v >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - off))
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32; 6-bit scales and mins packed in 12 bytes (get_scale_min_k4);
// chunk k of 32 bytes gives sub-block 2k (low nibbles) and 2k + 1 (high nibbles); Q5_K's fifth
// bits are bits 2k and 2k + 1 of the 32-byte qh plane.
function unpackQ45K(type: i32, b: usize, u: usize): void {
  const five = type == TYPE_Q5_K
  blockD = half(b)
  blockDmin = half(b + 2)
  const s = b + 4
  for (let j = 0; j < 8; j++) {
    let sc: i32
    let mn: i32
    if (j < 4) {
      sc = <i32>load<u8>(s + j) & 63
      mn = <i32>load<u8>(s + j + 4) & 63
    } else {
      sc = (<i32>load<u8>(s + j + 4) & 0xf) | ((<i32>load<u8>(s + j - 4) >> 6) << 4)
      mn = (<i32>load<u8>(s + j + 4) >> 4) | ((<i32>load<u8>(s + j) >> 6) << 4)
    }
    store<i32>(u + SCALES + (<usize>j << 2), sc)
    store<i32>(u + MINS + (<usize>j << 2), mn)
  }
  const qs = b + (five ? 48 : 16)
  const m4 = i8x16.splat(0x0f)
  const one = i8x16.splat(1)
  for (let k = 0; k < 4; k++) {
    for (let h = 0; h < 32; h += 16) {
      const v = v128.load(qs + 32 * k + h)
      let lo = v128.and(v, m4)
      let hi = i8x16.shr_u(v, 4)
      if (five) {
        const hb = v128.load(b + 16 + h)
        lo = v128.or(lo, i8x16.shl(v128.and(i8x16.shr_u(hb, 2 * k), one), 4))
        hi = v128.or(hi, i8x16.shl(v128.and(i8x16.shr_u(hb, 2 * k + 1), one), 4))
      }
      store16(u + (<usize>(64 * k + h) << 1), lo)
      store16(u + (<usize>(64 * k + 32 + h) << 1), hi)
    }
  }
}

// Q6_K: 16 sub-blocks of 16 with int8 scales; 4 low bits from ql, 2 high bits from qh, minus 32.
function unpackQ6K(b: usize, u: usize): void {
  blockD = half(b + 208)
  blockDmin = 0
  for (let s = 0; s < 16; s++) store<i32>(u + SCALES + (<usize>s << 2), <i32>load<i8>(b + 192 + s))
  const m4 = i8x16.splat(0x0f)
  const m2 = i8x16.splat(3)
  const c32 = i8x16.splat(32)
  for (let n = 0; n < 2; n++) {
    for (let l = 0; l < 32; l += 16) {
      const a = v128.load(b + 64 * n + l)
      const c = v128.load(b + 64 * n + l + 32)
      const hb = v128.load(b + 128 + 32 * n + l)
      const base = u + (<usize>(128 * n + l) << 1)
      store16(base, i8x16.sub(v128.or(v128.and(a, m4), i8x16.shl(v128.and(hb, m2), 4)), c32))
      store16(base + 64, i8x16.sub(v128.or(v128.and(c, m4), i8x16.shl(v128.and(i8x16.shr_u(hb, 2), m2), 4)), c32))
      store16(base + 128, i8x16.sub(v128.or(i8x16.shr_u(a, 4), i8x16.shl(v128.and(i8x16.shr_u(hb, 4), m2), 4)), c32))
      store16(base + 192, i8x16.sub(v128.or(i8x16.shr_u(c, 4), i8x16.shl(i8x16.shr_u(hb, 6), 4)), c32))
    }
  }
}

// Q3_K: 2-bit quants (qs), minus 4 where the hmask bit is clear; 16 signed 6-bit scales: low 4
// bits from bytes 0..7 (low nibbles, then high nibbles), high 2 bits from bytes 8..11.
function unpackQ3K(b: usize, u: usize): void {
  blockD = half(b + 108)
  blockDmin = 0
  const sc = b + 96
  for (let s = 0; s < 16; s++) {
    const lo: i32 = s < 8 ? <i32>load<u8>(sc + s) & 0xf : <i32>load<u8>(sc + s - 8) >> 4
    const hi: i32 = (<i32>load<u8>(sc + 8 + (s & 3)) >> (2 * (s >> 2))) & 3
    store<i32>(u + SCALES + (<usize>s << 2), (lo | (hi << 4)) - 32)
  }
  const m2 = i8x16.splat(3)
  const one = i8x16.splat(1)
  for (let n = 0; n < 2; n++) {
    for (let j = 0; j < 4; j++) {
      for (let l = 0; l < 32; l += 16) {
        const low = v128.and(i8x16.shr_u(v128.load(b + 32 + 32 * n + l), 2 * j), m2)
        const clear = v128.xor(v128.and(i8x16.shr_u(v128.load(b + l), 4 * n + j), one), one)
        store16(u + (<usize>(128 * n + 32 * j + l) << 1), i8x16.sub(low, i8x16.shl(clear, 2)))
      }
    }
  }
}

// Q2_K: 2-bit quants; 16 sub-blocks of 16 with a 4-bit scale (low nibble) and min (high nibble).
function unpackQ2K(b: usize, u: usize): void {
  blockD = half(b + 80)
  blockDmin = half(b + 82)
  for (let s = 0; s < 16; s++) {
    const v = <i32>load<u8>(b + s)
    store<i32>(u + SCALES + (<usize>s << 2), v & 0xf)
    store<i32>(u + MINS + (<usize>s << 2), v >> 4)
  }
  const m2 = i8x16.splat(3)
  for (let n = 0; n < 2; n++) {
    for (let j = 0; j < 4; j++) {
      for (let l = 0; l < 32; l += 16) {
        store16(u + (<usize>(128 * n + 32 * j + l) << 1), v128.and(i8x16.shr_u(v128.load(b + 16 + 32 * n + l), 2 * j), m2))
      }
    }
  }
}
