// f32, f16 and bf16 weight matmul: out[t, r] = Σ_k w[r, k] x[t, k]. W = f32, u16 (IEEE half
// bits) or i16 (bf16 bits: the top half of an f32, widened exactly).
// Canonical order of every dot product (whatever the tile, thread or batch size):
//   acc = f32x4(0); for k in steps of 4: acc = acc + w[k..k+4] * x[k..k+4]   (mul, then add)
//   s = (acc0 + acc1) + (acc2 + acc3); for the k % 4 tail: s = s + w[k] * x[k]
// so a batched call gives row t the same bits as a T = 1 call, and threads only split rows.
import { halfToFloat, halfToFloat4, hsum } from './common'

@inline
function loadW<W>(p: usize): v128 {
  if (sizeof<W>() == 4) return v128.load(p)
  if (isSigned<W>()) return i32x4.shl(v128.load16x4_u(p), 16)
  return halfToFloat4(v128.load16x4_u(p))
}

@inline
function scalarW<W>(p: usize): f32 {
  if (sizeof<W>() == 4) return load<f32>(p)
  if (isSigned<W>()) return reinterpret<f32>(<u32>load<u16>(p) << 16)
  return halfToFloat(<u32>load<u16>(p))
}

function dot1<W>(w: usize, x: usize, n: i32): f32 {
  let acc = f32x4.splat(0)
  const n4 = n & ~3
  let k = 0
  for (; k < n4; k += 4) acc = f32x4.add(acc, f32x4.mul(loadW<W>(w + <usize>k * sizeof<W>()), v128.load(x + (<usize>k << 2))))
  let s = hsum(acc)
  for (; k < n; k++) s += scalarW<W>(w + <usize>k * sizeof<W>()) * load<f32>(x + (<usize>k << 2))
  return s
}

@inline
function tail<W>(acc: v128, w: usize, x: usize, n4: i32, n: i32): f32 {
  let s = hsum(acc)
  for (let k = n4; k < n; k++) s += scalarW<W>(w + <usize>k * sizeof<W>()) * load<f32>(x + (<usize>k << 2))
  return s
}

/** Four rows against one token; out points at out[t, r], rows contiguous. */
function tile4x1<W>(w: usize, ws: usize, x: usize, n: i32, out: usize): void {
  let a0 = f32x4.splat(0)
  let a1 = f32x4.splat(0)
  let a2 = f32x4.splat(0)
  let a3 = f32x4.splat(0)
  const n4 = n & ~3
  for (let k = 0; k < n4; k += 4) {
    const xv = v128.load(x + (<usize>k << 2))
    const o = <usize>k * sizeof<W>()
    a0 = f32x4.add(a0, f32x4.mul(loadW<W>(w + o), xv))
    a1 = f32x4.add(a1, f32x4.mul(loadW<W>(w + ws + o), xv))
    a2 = f32x4.add(a2, f32x4.mul(loadW<W>(w + 2 * ws + o), xv))
    a3 = f32x4.add(a3, f32x4.mul(loadW<W>(w + 3 * ws + o), xv))
  }
  store<f32>(out, tail<W>(a0, w, x, n4, n))
  store<f32>(out + 4, tail<W>(a1, w + ws, x, n4, n))
  store<f32>(out + 8, tail<W>(a2, w + 2 * ws, x, n4, n))
  store<f32>(out + 12, tail<W>(a3, w + 3 * ws, x, n4, n))
}

/** Four rows against two tokens: each weight vector is loaded once for both tokens. */
function tile4x2<W>(w: usize, ws: usize, x: usize, xs: usize, n: i32, out: usize, os: usize): void {
  let a0 = f32x4.splat(0)
  let a1 = f32x4.splat(0)
  let a2 = f32x4.splat(0)
  let a3 = f32x4.splat(0)
  let b0 = f32x4.splat(0)
  let b1 = f32x4.splat(0)
  let b2 = f32x4.splat(0)
  let b3 = f32x4.splat(0)
  const n4 = n & ~3
  for (let k = 0; k < n4; k += 4) {
    const xa = v128.load(x + (<usize>k << 2))
    const xb = v128.load(x + xs + (<usize>k << 2))
    const o = <usize>k * sizeof<W>()
    const w0 = loadW<W>(w + o)
    const w1 = loadW<W>(w + ws + o)
    const w2 = loadW<W>(w + 2 * ws + o)
    const w3 = loadW<W>(w + 3 * ws + o)
    a0 = f32x4.add(a0, f32x4.mul(w0, xa))
    a1 = f32x4.add(a1, f32x4.mul(w1, xa))
    a2 = f32x4.add(a2, f32x4.mul(w2, xa))
    a3 = f32x4.add(a3, f32x4.mul(w3, xa))
    b0 = f32x4.add(b0, f32x4.mul(w0, xb))
    b1 = f32x4.add(b1, f32x4.mul(w1, xb))
    b2 = f32x4.add(b2, f32x4.mul(w2, xb))
    b3 = f32x4.add(b3, f32x4.mul(w3, xb))
  }
  store<f32>(out, tail<W>(a0, w, x, n4, n))
  store<f32>(out + 4, tail<W>(a1, w + ws, x, n4, n))
  store<f32>(out + 8, tail<W>(a2, w + 2 * ws, x, n4, n))
  store<f32>(out + 12, tail<W>(a3, w + 3 * ws, x, n4, n))
  store<f32>(out + os, tail<W>(b0, w, x + xs, n4, n))
  store<f32>(out + os + 4, tail<W>(b1, w + ws, x + xs, n4, n))
  store<f32>(out + os + 8, tail<W>(b2, w + 2 * ws, x + xs, n4, n))
  store<f32>(out + os + 12, tail<W>(b3, w + 3 * ws, x + xs, n4, n))
}

/** Rows [r0, r1) of out[T, rows] = x[T, cols] · wᵀ. Row tiles outermost so weights stay in cache over T. */
export function matmulF<W>(w: usize, x: usize, out: usize, rows: i32, cols: i32, T: i32, r0: i32, r1: i32): void {
  const ws = <usize>cols * sizeof<W>()
  const xs = <usize>cols << 2
  const os = <usize>rows << 2
  let r = r0
  for (; r + 4 <= r1; r += 4) {
    const wr = w + <usize>r * ws
    let t = 0
    for (; t + 2 <= T; t += 2) tile4x2<W>(wr, ws, x + <usize>t * xs, xs, cols, out + <usize>t * os + (<usize>r << 2), os)
    if (t < T) tile4x1<W>(wr, ws, x + <usize>t * xs, cols, out + <usize>t * os + (<usize>r << 2))
  }
  for (; r < r1; r++) {
    for (let t = 0; t < T; t++) store<f32>(out + <usize>t * os + (<usize>r << 2), dot1<W>(w + <usize>r * ws, x + <usize>t * xs, cols))
  }
}
