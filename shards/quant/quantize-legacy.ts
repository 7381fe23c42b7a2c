import { f32ToF16 } from '../f16.js'

/**
 * Quantisers of the 32-element legacy blocks, following ggml's reference rounding
 * (quantize_row_q*_ref in ggml-quants.c): the scale comes from the block's extreme values,
 * elements are rounded by truncating x/d + ½ (C's (int8_t) cast), scales are stored as f16.
 * Each function encodes src[s .. s+32) into the block at byte `at` of `dst`.
 */
const fr = Math.fround

function putHalf(dst: Uint8Array, at: number, v: number): void {
  const h = f32ToF16(v)
  dst[at] = h & 0xff
  dst[at + 1] = h >> 8
}

function putU32(dst: Uint8Array, at: number, v: number): void {
  dst[at] = v & 0xff
  dst[at + 1] = (v >>> 8) & 0xff
  dst[at + 2] = (v >>> 16) & 0xff
  dst[at + 3] = v >>> 24
}

/** The element of largest magnitude, with its sign (the first one on ties). */
function signedAbsMax(src: Float32Array, s: number): number {
  let amax = 0
  let max = 0
  for (let j = 0; j < 32; j++) {
    const v = src[s + j]
    if (Math.abs(v) > amax) {
      amax = Math.abs(v)
      max = v
    }
  }
  return max
}

function minMax(src: Float32Array, s: number): [number, number] {
  let min = Number.POSITIVE_INFINITY
  let max = Number.NEGATIVE_INFINITY
  for (let j = 0; j < 32; j++) {
    min = Math.min(min, src[s + j])
    max = Math.max(max, src[s + j])
  }
  return [min, max]
}

/** Symmetric blocks: d = max / −2^(bits−1), so the largest magnitude maps to −2^(bits−1). */
function quantSymmetric(src: Float32Array, s: number, levels: number): { d: number; q: Uint8Array } {
  const d = fr(signedAbsMax(src, s) / -(levels / 2))
  const id = d !== 0 ? fr(1 / d) : 0
  const q = new Uint8Array(32)
  for (let j = 0; j < 32; j++) q[j] = Math.min(levels - 1, Math.trunc(fr(fr(src[s + j] * id) + (levels / 2 + 0.5))))
  return { d, q }
}

/** Affine blocks: x ≈ d·q + min with d = (max − min) / (levels − 1). */
function quantAffine(src: Float32Array, s: number, levels: number): { d: number; m: number; q: Uint8Array } {
  const [min, max] = minMax(src, s)
  const d = fr((max - min) / (levels - 1))
  const id = d !== 0 ? fr(1 / d) : 0
  const q = new Uint8Array(32)
  for (let j = 0; j < 32; j++) q[j] = Math.min(levels - 1, Math.trunc(fr(fr(fr(src[s + j] - min) * id) + 0.5)))
  return { d, m: min, q }
}

function packNibbles(q: Uint8Array, dst: Uint8Array, at: number): void {
  for (let j = 0; j < 16; j++) dst[at + j] = (q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4)
}

/** Bit i of the result is the fifth bit of element i. */
function fifthBits(q: Uint8Array): number {
  let qh = 0
  for (let j = 0; j < 32; j++) qh |= ((q[j] >> 4) & 1) << j
  return qh >>> 0
}

export function quantQ4_0(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  const { d, q } = quantSymmetric(src, s, 16)
  putHalf(dst, at, d)
  packNibbles(q, dst, at + 2)
}

export function quantQ4_1(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  const { d, m, q } = quantAffine(src, s, 16)
  putHalf(dst, at, d)
  putHalf(dst, at + 2, m)
  packNibbles(q, dst, at + 4)
}

export function quantQ5_0(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  const { d, q } = quantSymmetric(src, s, 32)
  putHalf(dst, at, d)
  putU32(dst, at + 2, fifthBits(q))
  packNibbles(q, dst, at + 6)
}

export function quantQ5_1(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  const { d, m, q } = quantAffine(src, s, 32)
  putHalf(dst, at, d)
  putHalf(dst, at + 2, m)
  putU32(dst, at + 4, fifthBits(q))
  packNibbles(q, dst, at + 8)
}

/** ggml quantize_row_q8_0_ref: d = amax/127, q = roundf(x/d) (halves away from zero). */
export function quantQ8_0(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  let amax = 0
  for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(src[s + j]))
  const d = fr(amax / 127)
  const id = d !== 0 ? fr(1 / d) : 0
  putHalf(dst, at, d)
  for (let j = 0; j < 32; j++) {
    const v = fr(src[s + j] * id)
    dst[at + 2 + j] = (v < 0 ? -Math.round(-v) : Math.round(v)) & 0xff
  }
}
