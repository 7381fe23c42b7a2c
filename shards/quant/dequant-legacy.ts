import { f16Table } from '../f16.js'

/**
 * Reference dequantisers of ggml's 32-element "legacy" blocks, written from the block structs
 * of ggml-common.h and the meaning of each field (ggml-quants.c dequantize_row_*). Arithmetic
 * is float32 step by step (Math.fround), as the C code computes in `float`:
 *
 *   Q4_0  18 bytes: f16 d, u8 qs[16]                 x = d·(q − 8),   q 4 bits
 *   Q4_1  20 bytes: f16 d, f16 m, u8 qs[16]          x = d·q + m,     q 4 bits
 *   Q5_0  22 bytes: f16 d, u32 qh, u8 qs[16]         x = d·(q − 16),  q 5 bits
 *   Q5_1  24 bytes: f16 d, f16 m, u32 qh, u8 qs[16]  x = d·q + m,     q 5 bits
 *   Q8_0  34 bytes: f16 d, i8 qs[32]                 x = d·q
 *
 * Element order inside a block: element j (j < 16) is the LOW nibble of qs[j], element j + 16
 * the HIGH nibble of qs[j]. For Q5 the fifth bit of element i is bit i of the little-endian
 * u32 qh.
 *
 * Each function decodes one block starting at byte `at` of `src` into out[o .. o+32).
 */
const fr = Math.fround

function half(src: Uint8Array, at: number): number {
  return f16Table()[src[at] | (src[at + 1] << 8)]
}

function u32(src: Uint8Array, at: number): number {
  return (src[at] | (src[at + 1] << 8) | (src[at + 2] << 16) | (src[at + 3] << 24)) >>> 0
}

export function dequantQ4_0(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const d = half(src, at)
  for (let j = 0; j < 16; j++) {
    const byte = src[at + 2 + j]
    out[o + j] = fr(((byte & 0x0f) - 8) * d)
    out[o + j + 16] = fr(((byte >> 4) - 8) * d)
  }
}

export function dequantQ4_1(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const d = half(src, at)
  const m = half(src, at + 2)
  for (let j = 0; j < 16; j++) {
    const byte = src[at + 4 + j]
    out[o + j] = fr(fr((byte & 0x0f) * d) + m)
    out[o + j + 16] = fr(fr((byte >> 4) * d) + m)
  }
}

export function dequantQ5_0(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const d = half(src, at)
  const qh = u32(src, at + 2)
  for (let j = 0; j < 16; j++) {
    const byte = src[at + 6 + j]
    const lo = (byte & 0x0f) | (((qh >>> j) & 1) << 4)
    const hi = (byte >> 4) | (((qh >>> (j + 16)) & 1) << 4)
    out[o + j] = fr((lo - 16) * d)
    out[o + j + 16] = fr((hi - 16) * d)
  }
}

export function dequantQ5_1(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const d = half(src, at)
  const m = half(src, at + 2)
  const qh = u32(src, at + 4)
  for (let j = 0; j < 16; j++) {
    const byte = src[at + 8 + j]
    const lo = (byte & 0x0f) | (((qh >>> j) & 1) << 4)
    const hi = (byte >> 4) | (((qh >>> (j + 16)) & 1) << 4)
    out[o + j] = fr(fr(lo * d) + m)
    out[o + j + 16] = fr(fr(hi * d) + m)
  }
}

export function dequantQ8_0(src: Uint8Array, at: number, out: Float32Array, o: number): void {
  const d = half(src, at)
  for (let j = 0; j < 32; j++) out[o + j] = fr(((src[at + 2 + j] << 24) >> 24) * d)
}
