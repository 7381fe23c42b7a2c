import { f16Table } from '../f16.js'

/**
 * Reference dequantisers of ggml's K-quant super-blocks (256 elements), written from the block
 * structs of ggml-common.h and the meaning of each field (ggml-quants.c dequantize_row_q*_K).
 * Arithmetic is float32 step by step (Math.fround), as the C code computes in `float`.
 *
 * Element e of a super-block (0 ≤ e < 256) belongs to sub-block e/16 (Q2_K, Q3_K, Q6_K) or
 * e/32 (Q4_K, Q5_K), each with its own small integer scale (and min).
 *
 *   Q2_K  84 bytes: u8 scales[16], u8 qs[64], f16 d, f16 dmin
 *         scales[s]: low nibble scale, high nibble min.  x = (d·sc)·q − (dmin·m), q 2 bits
 *   Q3_K 110 bytes: u8 hmask[32], u8 qs[64], u8 scales[12], f16 d
 *         16 signed 6-bit scales (stored +32).  x = (d·(sc−32))·(q − 4·!hbit), q 2 bits + 1 high
 *   Q4_K 144 bytes: f16 d, f16 dmin, u8 scales[12], u8 qs[128]
 *         8 6-bit (scale, min) pairs.  x = (d·sc)·q − (dmin·m), q 4 bits
 *   Q5_K 176 bytes: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]
 *         as Q4_K with a fifth bit per element from qh.  q 5 bits
 *   Q6_K 210 bytes: u8 ql[128], u8 qh[64], i8 scales[16], f16 d
 *         x = (d·sc)·(q − 32), q 4 low bits from ql + 2 high bits from qh
 *
 * 2-bit fields (Q2_K, Q3_K low bits, Q6_K high bits): the 256 elements are two halves of 128;
 * in half n, element 32·j + l (j < 4, l < 32) is bits 2j..2j+1 of byte 32·n + l of the field.
 * 4-bit fields (Q4_K, Q5_K): in each 64-element chunk c, element l is the low nibble of
 * qs[32c + l] and element 32 + l its high nibble. Q6_K's low nibbles: in half n, elements
 * l and 64 + l share ql[64n + l] (low, high nibble), elements 32 + l and 96 + l share
 * ql[64n + 32 + l].
 *
 * Each function decodes one super-block starting at byte `at` of `src` into out[o .. o+256).
 */
const fr = Math.fround

function half(src: Uint8Array, at: number): number {
  return f16Table()[src[at] | (src[at + 1] << 8)]
}

/**
 * The 8 (scale, min) pairs of Q4_K/Q5_K, 6 bits each, packed in 12 bytes (get_scale_min_k4):
 * pairs 0..3 are the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); pairs 4..7 take their
 * low 4 bits from the nibbles of bytes 8..11 (scale low, min high) and their top 2 bits from
 * the top 2 bits of bytes 0..3 (scales) and 4..7 (mins).
 */
export function scaleMinK4(j: number, src: Uint8Array, at: number): { scale: number; min: number } {
  if (j < 4) return { scale: src[at + j] & 63, min: src[at + j + 4] & 63 }
  return {
    scale: (src[at + j + 4] & 0x0f) | ((src[at + j - 4] >> 6) << 4),
    min: (src[at + j + 4] >> 4) | ((src[at + j] >> 6) << 4)
  }
}

/**
 * The 16 signed scales of Q3_K, 6 bits each stored with +32, packed in 12 bytes: the low 4 bits
 * of scale s are the low nibble of byte s (s < 8) or the high nibble of byte s − 8 (s ≥ 8); the
 * top 2 bits are bits 2·(s/4) .. 2·(s/4)+1 of byte 8 + s % 4.
 */
export function scaleQ3K(s: number, src: Uint8Array, at: number): number {
  const low = s < 8 ? src[at + s] & 0x0f : src[at + s - 8] >> 4
  const high = (src[at + 8 + (s % 4)] >> (2 * Math.floor(s / 4))) & 3
  return (low | (high << 4)) - 32
}

export function dequantQ2_K(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const qs = at + 16
  const d = half(src, at + 80)
  const dmin = half(src, at + 82)
  for (let e = 0; e < 256; e++) {
    const sc = src[at + Math.floor(e / 16)]
    const dl = fr(d * (sc & 0x0f))
    const ml = fr(dmin * (sc >> 4))
    const n = Math.floor(e / 128)
    const j = Math.floor((e % 128) / 32)
    const q = (src[qs + 32 * n + (e % 32)] >> (2 * j)) & 3
    out[o + e] = fr(fr(dl * q) - ml)
  }
}

export function dequantQ3_K(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const hmask = at
  const qs = at + 32
  const d = half(src, at + 108)
  for (let e = 0; e < 256; e++) {
    const dl = fr(d * scaleQ3K(Math.floor(e / 16), src, at + 96))
    const n = Math.floor(e / 128)
    const j = Math.floor((e % 128) / 32)
    const low = (src[qs + 32 * n + (e % 32)] >> (2 * j)) & 3
    // The high bit of element e is bit e/32 of hmask[e % 32]; a clear bit subtracts 4.
    const high = (src[hmask + (e % 32)] >> Math.floor(e / 32)) & 1
    out[o + e] = fr(dl * (low - (high ? 0 : 4)))
  }
}

function dequantQ45K(src: Uint8Array, at: number, out: Float32Array, o: number, fifthBit: boolean): void {
  const d = half(src, at)
  const dmin = half(src, at + 2)
  const qh = at + 16
  const qs = fifthBit ? at + 48 : at + 16
  for (let e = 0; e < 256; e++) {
    const sub = Math.floor(e / 32)
    const { scale, min } = scaleMinK4(sub, src, at + 4)
    const d1 = fr(d * scale)
    const m1 = fr(dmin * min)
    const c = Math.floor(e / 64)
    const l = e % 32
    const byte = src[qs + 32 * c + l]
    let q = e % 64 < 32 ? byte & 0x0f : byte >> 4
    if (fifthBit) q |= ((src[qh + l] >> sub) & 1) << 4
    out[o + e] = fr(fr(d1 * q) - m1)
  }
}

export function dequantQ4_K(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  dequantQ45K(src, at, out, o, false)
}

export function dequantQ5_K(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  dequantQ45K(src, at, out, o, true)
}

export function dequantQ6_K(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const ql = at
  const qh = at + 128
  const d = half(src, at + 208)
  for (let e = 0; e < 256; e++) {
    const sc = (src[at + 192 + Math.floor(e / 16)] << 24) >> 24
    const n = Math.floor(e / 128)
    const i = e % 128
    const j = Math.floor(i / 32) // which 2-bit field of qh, and which ql nibble
    const l = i % 32
    const lowByte = src[ql + 64 * n + (j % 2) * 32 + l]
    const low = j < 2 ? lowByte & 0x0f : lowByte >> 4
    const high = (src[qh + 32 * n + l] >> (2 * j)) & 3
    out[o + e] = fr(fr(d * sc) * ((low | (high << 4)) - 32))
  }
}
