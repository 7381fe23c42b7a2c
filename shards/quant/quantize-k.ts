import { f16Table, f32ToF16 } from '../f16.js'

/**
 * Quantisers of the K-quant super-blocks (256 elements). Simpler than llama.cpp's
 * (quantize_row_q*_K_ref searches each sub-block's scale and min by weighted least squares,
 * make_qkx2_quants / make_qx_quants): here a sub-block's scale and min come straight from its
 * extreme values, the sub-block scales are rounded to their 4/6/8-bit codes against the
 * super-block scale (as ggml does), and every element is then rounded against the scale it
 * will actually be decoded with. The byte layout is exactly ggml's (see dequant-k.ts), so
 * llama.cpp reads these blocks; only the choice of codes differs, and the round-trip tests
 * bound the error. Each function encodes src[s .. s+256) into the block at byte `at` of `dst`.
 */
const fr = Math.fround

function putHalf(dst: Uint8Array, at: number, v: number): number {
  const h = f32ToF16(v)
  dst[at] = h & 0xff
  dst[at + 1] = h >> 8
  return f16Table()[h] // the value the decoder will see
}

const clamp = (v: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, v))
/** C's nearest_int / roundf for the code choices: halves away from zero. */
const round = (v: number): number => (v < 0 ? -Math.round(-v) : Math.round(v))

interface Affine {
  scale: Float32Array
  min: Float32Array
}

/** Per sub-block: x ≈ scale·q − min with q in 0..levels−1, min ≥ 0 (the range always holds 0). */
function affineSubBlocks(src: Float32Array, s: number, subLen: number, levels: number): Affine {
  const n = 256 / subLen
  const scale = new Float32Array(n)
  const min = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    let lo = 0
    let hi = Number.NEGATIVE_INFINITY
    for (let j = 0; j < subLen; j++) {
      lo = Math.min(lo, src[s + i * subLen + j])
      hi = Math.max(hi, src[s + i * subLen + j])
    }
    scale[i] = (hi - lo) / (levels - 1)
    min[i] = -lo
  }
  return { scale, min }
}

/** Per sub-block: x ≈ scale·q with q in −half..half−1, the largest magnitude mapping to −half. */
function symmetricSubBlocks(src: Float32Array, s: number, subLen: number, half: number): Float32Array {
  const scale = new Float32Array(256 / subLen)
  for (let i = 0; i < scale.length; i++) {
    let max = 0
    for (let j = 0; j < subLen; j++) {
      const v = src[s + i * subLen + j]
      if (Math.abs(v) > Math.abs(max)) max = v
    }
    scale[i] = max / -half
  }
  return scale
}

function maxOf(a: Float32Array): number {
  return a.reduce((m, v) => Math.max(m, v), 0)
}

/** The signed value of largest magnitude. */
function signedMaxOf(a: Float32Array): number {
  return a.reduce((m, v) => (Math.abs(v) > Math.abs(m) ? v : m), 0)
}

/** Codes 0..codeMax of non-negative sub-block values against a super-block scale stored at `at`. */
function codesAgainst(values: Float32Array, codeMax: number, dst: Uint8Array, at: number): { dq: number; codes: Uint8Array } {
  const max = maxOf(values)
  const inv = max > 0 ? codeMax / max : 0
  const codes = Uint8Array.from(values, (v) => clamp(round(inv * v), 0, codeMax))
  const dq = putHalf(dst, at, max / codeMax)
  return { dq, codes }
}

export function quantQ2_K(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  const { scale, min } = affineSubBlocks(src, s, 16, 4)
  const sc = codesAgainst(scale, 15, dst, at + 80)
  const mn = codesAgainst(min, 15, dst, at + 82)
  dst.fill(0, at + 16, at + 80)
  for (let i = 0; i < 16; i++) dst[at + i] = sc.codes[i] | (mn.codes[i] << 4)
  for (let e = 0; e < 256; e++) {
    const sub = Math.floor(e / 16)
    const dl = fr(sc.dq * sc.codes[sub])
    const ml = fr(mn.dq * mn.codes[sub])
    const q = dl > 0 ? clamp(round((src[s + e] + ml) / dl), 0, 3) : 0
    const n = Math.floor(e / 128)
    const j = Math.floor((e % 128) / 32)
    dst[at + 16 + 32 * n + (e % 32)] |= q << (2 * j)
  }
}

export function quantQ3_K(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  const scale = symmetricSubBlocks(src, s, 16, 4)
  const maxScale = signedMaxOf(scale)
  const iscale = maxScale !== 0 ? -32 / maxScale : 0
  const dq = putHalf(dst, at + 108, iscale !== 0 ? 1 / iscale : 0)
  dst.fill(0, at, at + 108)
  for (let i = 0; i < 16; i++) {
    const code = clamp(round(iscale * scale[i]), -32, 31) + 32
    if (i < 8) dst[at + 96 + i] |= code & 0x0f
    else dst[at + 96 + i - 8] |= (code & 0x0f) << 4
    dst[at + 96 + 8 + (i % 4)] |= (code >> 4) << (2 * Math.floor(i / 4))
  }
  for (let e = 0; e < 256; e++) {
    const code = clamp(round(iscale * scale[Math.floor(e / 16)]), -32, 31)
    const dl = fr(dq * code)
    const L = (dl !== 0 ? clamp(round(src[s + e] / dl), -4, 3) : 0) + 4 // 0..7
    const n = Math.floor(e / 128)
    const j = Math.floor((e % 128) / 32)
    dst[at + 32 + 32 * n + (e % 32)] |= (L & 3) << (2 * j)
    if (L > 3) dst[at + (e % 32)] |= 1 << Math.floor(e / 32)
  }
}

/** Pack 8 (scale, min) 6-bit pairs the way scaleMinK4 (dequant-k.ts) reads them. */
function packScaleMinK4(sc: Uint8Array, mn: Uint8Array, dst: Uint8Array, at: number): void {
  for (let j = 0; j < 4; j++) {
    dst[at + j] = sc[j] | ((sc[j + 4] >> 4) << 6)
    dst[at + j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6)
    dst[at + j + 8] = (sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4)
  }
}

function quantQ45K(src: Float32Array, s: number, dst: Uint8Array, at: number, fifthBit: boolean): void {
  const levels = fifthBit ? 32 : 16
  const { scale, min } = affineSubBlocks(src, s, 32, levels)
  const sc = codesAgainst(scale, 63, dst, at)
  const mn = codesAgainst(min, 63, dst, at + 2)
  packScaleMinK4(sc.codes, mn.codes, dst, at + 4)
  const qh = at + 16
  const qs = fifthBit ? at + 48 : at + 16
  dst.fill(0, qh, at + (fifthBit ? 176 : 144))
  for (let sub = 0; sub < 8; sub++) {
    const d1 = fr(sc.dq * sc.codes[sub])
    const m1 = fr(mn.dq * mn.codes[sub])
    // Sub-block `sub` is the low (even) or high (odd) nibbles of qs[32·(sub/2) .. +32].
    const nibbles = qs + 32 * (sub >> 1)
    const shift = (sub & 1) * 4
    for (let l = 0; l < 32; l++) {
      const q = d1 > 0 ? clamp(Math.round((src[s + 32 * sub + l] + m1) / d1), 0, levels - 1) : 0
      dst[nibbles + l] |= (q & 0x0f) << shift
      if (fifthBit) dst[qh + l] |= (q >> 4) << sub
    }
  }
}

export function quantQ4_K(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  quantQ45K(src, s, dst, at, false)
}

export function quantQ5_K(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  quantQ45K(src, s, dst, at, true)
}

export function quantQ6_K(src: Float32Array, s: number, dst: Uint8Array, at: number): void {
  const scale = symmetricSubBlocks(src, s, 16, 32)
  const maxScale = signedMaxOf(scale)
  const iscale = maxScale !== 0 ? -128 / maxScale : 0
  const dq = putHalf(dst, at + 208, iscale !== 0 ? 1 / iscale : 0)
  dst.fill(0, at, at + 192)
  for (let i = 0; i < 16; i++) dst[at + 192 + i] = clamp(round(iscale * scale[i]), -128, 127) & 0xff
  for (let sub = 0; sub < 16; sub++) {
    const dd = fr(dq * ((dst[at + 192 + sub] << 24) >> 24))
    // Elements 16·sub .. +16 sit in half n = sub/8, 2-bit field j = (sub/2) % 4, lanes l0 .. l0+16.
    const n = sub >> 3
    const j = (sub >> 1) & 3
    const l0 = (sub & 1) * 16
    const low = at + 64 * n + (j & 1) * 32
    const high = at + 128 + 32 * n
    for (let k = 0; k < 16; k++) {
      const q = (dd !== 0 ? clamp(round(src[s + 16 * sub + k] / dd), -32, 31) : 0) + 32 // 0..63
      dst[low + l0 + k] |= (q & 0x0f) << (j < 2 ? 0 : 4)
      dst[high + l0 + k] |= (q >> 4) << (2 * j)
    }
  }
}
