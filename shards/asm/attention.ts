// Causal grouped-query attention over a KV cache of f32 or f16 rows (llama2.c run.c forward,
// one (token, head) item at a time). Items are split across threads; each item is computed by
// the same code whatever the split or batch, so results are thread- and batch-independent.
import { halfToFloat, halfToFloat4, hsum } from './common'

@inline
function loadK<K>(p: usize): v128 {
  if (sizeof<K>() == 4) return v128.load(p)
  return halfToFloat4(v128.load16x4_u(p))
}

@inline
function scalarK<K>(p: usize): f32 {
  if (sizeof<K>() == 4) return load<f32>(p)
  return halfToFloat(<u32>load<u16>(p))
}

/** q · k in the canonical f32x4 order of matmul-f.ts. */
@inline
function dotQK<K>(q: usize, k: usize, n: i32): f32 {
  let acc = f32x4.splat(0)
  const n4 = n & ~3
  let i = 0
  for (; i < n4; i += 4) acc = f32x4.add(acc, f32x4.mul(v128.load(q + (<usize>i << 2)), loadK<K>(k + <usize>i * sizeof<K>())))
  let s = hsum(acc)
  for (; i < n; i++) s += load<f32>(q + (<usize>i << 2)) * scalarK<K>(k + <usize>i * sizeof<K>())
  return s
}

/**
 * e^x for x <= 0 (softmax arguments), 4 lanes: Cephes expf range reduction and polynomial
 * (as in ggml/sleef-style vector exps), ~2 ulp. Arguments below -87 give 0, -inf included.
 */
@inline
function expNeg(x: v128): v128 {
  const xc = f32x4.max(x, f32x4.splat(-87.0))
  const n = f32x4.nearest(f32x4.mul(xc, f32x4.splat(1.44269504088896341)))
  let r = f32x4.sub(xc, f32x4.mul(n, f32x4.splat(0.693359375)))
  r = f32x4.sub(r, f32x4.mul(n, f32x4.splat(-2.12194440e-4)))
  let p = f32x4.splat(1.9875691500e-4)
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.3981999507e-3))
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(8.3334519073e-3))
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(4.1665795894e-2))
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.6666665459e-1))
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(5.0000001201e-1))
  const y = f32x4.add(f32x4.add(f32x4.mul(f32x4.mul(p, r), r), r), f32x4.splat(1))
  const pow2n = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23)
  const e = f32x4.mul(y, pow2n)
  return v128.and(e, f32x4.gt(x, f32x4.splat(-87.0)))
}

/** One (token, head): q/out at qo/oo, cache rows at k/v (already offset to the kv head). */
function head<K>(q: usize, k: usize, v: usize, out: usize, len: i32, rowBytes: usize, hd: i32, scale: f32, att: usize): void {
  let mx: f32 = -Infinity
  for (let p = 0; p < len; p++) {
    const s = dotQK<K>(q, k + <usize>p * rowBytes, hd) * scale
    store<f32>(att + (<usize>p << 2), s)
    mx = max(mx, s)
  }
  const len4 = (len + 3) & ~3
  for (let p = len; p < len4; p++) store<f32>(att + (<usize>p << 2), -Infinity)
  const mv = f32x4.splat(mx)
  let sv = f32x4.splat(0)
  for (let p = 0; p < len4; p += 4) {
    const e = expNeg(f32x4.sub(v128.load(att + (<usize>p << 2)), mv))
    v128.store(att + (<usize>p << 2), e)
    sv = f32x4.add(sv, e)
  }
  const sum = f32x4.splat(hsum(sv))
  for (let p = 0; p < len4; p += 4) v128.store(att + (<usize>p << 2), f32x4.div(v128.load(att + (<usize>p << 2)), sum))
  // out[i] = Σ_p att[p] v[p, i], p ascending, one accumulator per element.
  const hd4 = hd & ~3
  let i = 0
  for (; i + 16 <= hd4; i += 16) {
    let a0 = f32x4.splat(0)
    let a1 = f32x4.splat(0)
    let a2 = f32x4.splat(0)
    let a3 = f32x4.splat(0)
    for (let p = 0; p < len; p++) {
      const a = v128.load32_splat(att + (<usize>p << 2))
      const vp = v + <usize>p * rowBytes + <usize>i * sizeof<K>()
      a0 = f32x4.add(a0, f32x4.mul(a, loadK<K>(vp)))
      a1 = f32x4.add(a1, f32x4.mul(a, loadK<K>(vp + 4 * sizeof<K>())))
      a2 = f32x4.add(a2, f32x4.mul(a, loadK<K>(vp + 8 * sizeof<K>())))
      a3 = f32x4.add(a3, f32x4.mul(a, loadK<K>(vp + 12 * sizeof<K>())))
    }
    const o = out + (<usize>i << 2)
    v128.store(o, a0)
    v128.store(o + 16, a1)
    v128.store(o + 32, a2)
    v128.store(o + 48, a3)
  }
  for (; i < hd4; i += 4) {
    let a0 = f32x4.splat(0)
    for (let p = 0; p < len; p++) {
      a0 = f32x4.add(a0, f32x4.mul(v128.load32_splat(att + (<usize>p << 2)), loadK<K>(v + <usize>p * rowBytes + <usize>i * sizeof<K>())))
    }
    v128.store(out + (<usize>i << 2), a0)
  }
  for (; i < hd; i++) {
    let s: f32 = 0
    for (let p = 0; p < len; p++) s += load<f32>(att + (<usize>p << 2)) * scalarK<K>(v + <usize>p * rowBytes + <usize>i * sizeof<K>())
    store<f32>(out + (<usize>i << 2), s)
  }
}

/** Items [i0, i1) of T × nHeads. att is this thread's scratch of startPos+T+3 floats. */
export function attention<K>(q: usize, k: usize, v: usize, out: usize, T: i32, startPos: i32, nHeads: i32, nKvHeads: i32, hd: i32, att: usize, i0: i32, i1: i32): void {
  const kvMul = nHeads / nKvHeads
  const kvDim = nKvHeads * hd
  const rowBytes = <usize>kvDim * sizeof<K>()
  const width = nHeads * hd
  const scale: f32 = <f32>1 / Mathf.sqrt(<f32>hd)
  for (let it = i0; it < i1; it++) {
    const t = it / nHeads
    const h = it % nHeads
    const qo = (<usize>t * width + <usize>h * hd) << 2
    const ko = <usize>((h / kvMul) * hd) * sizeof<K>()
    head<K>(q + qo, k + ko, v + ko, out + qo, startPos + t + 1, rowBytes, hd, scale, att)
  }
}
