// Q8_0 weights × Q8_0-quantized activations with integer dot products (llama.cpp
// ggml_vec_dot_q8_0_q8_0). Weights stay in GGUF blocks (f16 scale + 32 int8, 34 bytes).
// Activations are quantized once per call (ggml quantize_row_q8_0) and stored pre-widened to
// i16 so each block is 4 × (load8x8_s, i32x4.dot_i16x8_s).
// Canonical order (ggml's generic C path): per block the exact integer sum isum, then
//   sumf = sumf + f32(isum) * (dw * dx)      over blocks in order, f32 rounding at each step.
// Integer sums are exact, so only that float chain fixes the bits: batch, tile and thread
// count cannot change them, and the native addon reproduces them exactly.
import { floatToHalf, halfToFloat, halfToFloat4, hsumI } from './common'

const QK: i32 = 32
const QB: usize = 34

/** Quantize x[T, cols] to xq (i16) [T, cols] and xd (f32, f16-rounded scales) [T, cols/32]. */
export function quantizeQ8(x: usize, xq: usize, xd: usize, cols: i32, T: i32): void {
  const nb = cols / QK
  for (let t = 0; t < T; t++) {
    for (let b = 0; b < nb; b++) {
      const src = x + ((<usize>t * cols + b * QK) << 2)
      let m = f32x4.splat(0)
      for (let i = 0; i < QK; i += 4) m = f32x4.max(m, f32x4.abs(v128.load(src + (<usize>i << 2))))
      const amax = max(max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)))
      const d: f32 = amax / 127
      const id: f32 = d != 0 ? <f32>1 / d : 0
      store<f32>(xd + ((<usize>t * nb + b) << 2), halfToFloat(floatToHalf(d)))
      const idv = f32x4.splat(id)
      const dst = xq + ((<usize>t * cols + b * QK) << 1)
      for (let i = 0; i < QK; i += 8) {
        const lo = roundAway(f32x4.mul(v128.load(src + (<usize>i << 2)), idv))
        const hi = roundAway(f32x4.mul(v128.load(src + (<usize>i << 2) + 16), idv))
        v128.store(dst + (<usize>i << 1), i16x8.narrow_i32x4_s(i32x4.trunc_sat_f32x4_s(lo), i32x4.trunc_sat_f32x4_s(hi)))
      }
    }
  }
}

/** C roundf (halves away from zero), as ggml's reference quantizer. */
@inline
function roundAway(v: v128): v128 {
  const t = f32x4.trunc(v)
  const frac = f32x4.abs(f32x4.sub(v, t))
  const signOne = v128.or(v128.and(v, i32x4.splat(0x80000000)), f32x4.splat(1))
  return f32x4.add(t, v128.and(signOne, f32x4.ge(frac, f32x4.splat(0.5))))
}

/** i32x4 partial sums of one block: weight int8 at q, activation i16 vectors x0..x3. */
@inline
function blockDot(q: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  const s0 = i32x4.dot_i16x8_s(v128.load8x8_s(q), x0)
  const s1 = i32x4.dot_i16x8_s(v128.load8x8_s(q + 8), x1)
  const s2 = i32x4.dot_i16x8_s(v128.load8x8_s(q + 16), x2)
  const s3 = i32x4.dot_i16x8_s(v128.load8x8_s(q + 24), x3)
  return i32x4.add(i32x4.add(s0, s1), i32x4.add(s2, s3))
}

/** [Σa, Σb, Σc, Σd]: four horizontal integer sums at once. */
@inline
function sum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const u0 = i32x4.add(v128.shuffle<i32>(a, b, 0, 4, 1, 5), v128.shuffle<i32>(a, b, 2, 6, 3, 7))
  const u1 = i32x4.add(v128.shuffle<i32>(c, d, 0, 4, 1, 5), v128.shuffle<i32>(c, d, 2, 6, 3, 7))
  return i32x4.add(v128.shuffle<i32>(u0, u1, 0, 1, 4, 5), v128.shuffle<i32>(u0, u1, 2, 3, 6, 7))
}

/** Four rows (stride rb bytes) against one token; the four sums land in out[0..4). */
function tile4x1(w: usize, rb: usize, xq: usize, xd: usize, nb: i32, out: usize): void {
  let acc = f32x4.splat(0)
  for (let b = 0; b < nb; b++) {
    const wb = w + <usize>b * QB
    const xa = xq + (<usize>b << 6)
    const x0 = v128.load(xa)
    const x1 = v128.load(xa + 16)
    const x2 = v128.load(xa + 32)
    const x3 = v128.load(xa + 48)
    const isum = sum4(
      blockDot(wb + 2, x0, x1, x2, x3),
      blockDot(wb + rb + 2, x0, x1, x2, x3),
      blockDot(wb + 2 * rb + 2, x0, x1, x2, x3),
      blockDot(wb + 3 * rb + 2, x0, x1, x2, x3)
    )
    let h = i32x4.splat(<i32>load<u16>(wb))
    h = i32x4.replace_lane(h, 1, <i32>load<u16>(wb + rb))
    h = i32x4.replace_lane(h, 2, <i32>load<u16>(wb + 2 * rb))
    h = i32x4.replace_lane(h, 3, <i32>load<u16>(wb + 3 * rb))
    const d = f32x4.mul(halfToFloat4(h), f32x4.splat(load<f32>(xd + (<usize>b << 2))))
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(isum), d))
  }
  v128.store(out, acc)
}

function dot1(w: usize, xq: usize, xd: usize, nb: i32): f32 {
  let acc: f32 = 0
  for (let b = 0; b < nb; b++) {
    const wb = w + <usize>b * QB
    const xa = xq + (<usize>b << 6)
    const isum = hsumI(blockDot(wb + 2, v128.load(xa), v128.load(xa + 16), v128.load(xa + 32), v128.load(xa + 48)))
    acc += <f32>isum * (halfToFloat(<u32>load<u16>(wb)) * load<f32>(xd + (<usize>b << 2)))
  }
  return acc
}

/** One row against four tokens (activation stride xs bytes, scale stride ds bytes). */
function tile1x4(w: usize, xq: usize, xs: usize, xd: usize, ds: usize, nb: i32, out: usize, os: usize): void {
  let acc = f32x4.splat(0)
  for (let b = 0; b < nb; b++) {
    const wb = w + <usize>b * QB
    const w0 = v128.load8x8_s(wb + 2)
    const w1 = v128.load8x8_s(wb + 10)
    const w2 = v128.load8x8_s(wb + 18)
    const w3 = v128.load8x8_s(wb + 26)
    const xa = xq + (<usize>b << 6)
    const s0 = tokDot(xa, w0, w1, w2, w3)
    const s1 = tokDot(xa + xs, w0, w1, w2, w3)
    const s2 = tokDot(xa + 2 * xs, w0, w1, w2, w3)
    const s3 = tokDot(xa + 3 * xs, w0, w1, w2, w3)
    const xb = xd + (<usize>b << 2)
    let dx = f32x4.splat(load<f32>(xb))
    dx = f32x4.replace_lane(dx, 1, load<f32>(xb + ds))
    dx = f32x4.replace_lane(dx, 2, load<f32>(xb + 2 * ds))
    dx = f32x4.replace_lane(dx, 3, load<f32>(xb + 3 * ds))
    const d = f32x4.mul(f32x4.splat(halfToFloat(<u32>load<u16>(wb))), dx)
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(sum4(s0, s1, s2, s3)), d))
  }
  store<f32>(out, f32x4.extract_lane(acc, 0))
  store<f32>(out + os, f32x4.extract_lane(acc, 1))
  store<f32>(out + 2 * os, f32x4.extract_lane(acc, 2))
  store<f32>(out + 3 * os, f32x4.extract_lane(acc, 3))
}

@inline
function tokDot(xa: usize, w0: v128, w1: v128, w2: v128, w3: v128): v128 {
  const s0 = i32x4.dot_i16x8_s(w0, v128.load(xa))
  const s1 = i32x4.dot_i16x8_s(w1, v128.load(xa + 16))
  const s2 = i32x4.dot_i16x8_s(w2, v128.load(xa + 32))
  const s3 = i32x4.dot_i16x8_s(w3, v128.load(xa + 48))
  return i32x4.add(i32x4.add(s0, s1), i32x4.add(s2, s3))
}

function rowsOneToken(w: usize, rb: usize, xq: usize, xd: usize, nb: i32, out: usize, r0: i32, r1: i32): void {
  let r = r0
  for (; r + 4 <= r1; r += 4) tile4x1(w + <usize>r * rb, rb, xq, xd, nb, out + (<usize>r << 2))
  for (; r < r1; r++) store<f32>(out + (<usize>r << 2), dot1(w + <usize>r * rb, xq, xd, nb))
}

/** Rows [r0, r1) of out[T, rows] = W · x for Q8_0 W and activations from quantizeQ8. */
export function matmulQ8(w: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, T: i32, r0: i32, r1: i32): void {
  const nb = cols / QK
  const rb = <usize>nb * QB
  const xs = <usize>cols << 1
  const ds = <usize>nb << 2
  const os = <usize>rows << 2
  const T4 = T >= 4 ? T & ~3 : 0
  if (T4 > 0) {
    for (let r = r0; r < r1; r++) {
      const wr = w + <usize>r * rb
      for (let t = 0; t < T4; t += 4) tile1x4(wr, xq + <usize>t * xs, xs, xd + <usize>t * ds, ds, nb, out + <usize>t * os + (<usize>r << 2), os)
    }
  }
  for (let t = T4; t < T; t++) rowsOneToken(w, rb, xq + <usize>t * xs, xd + <usize>t * ds, nb, out + <usize>t * os, r0, r1)
}
