// Matmuls on the GGUF block types Q4_0, Q4_1, Q5_0, Q5_1 (× Q8_0 activations, from quantizeQ8)
// and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (× Q8_K activations, quantised by the host as ggml's
// quantize_row_q8_K_ref), bit-identical to shards/kernels/kernels-ref-exact-quant.ts and to the native
// addon (shards/native/quant-dot.cc). Activations arrive widened to i16.
// Inside a block every sum is an exact integer (i32x4.dot_i16x8_s), so lane order is free; the
// float steps per block then run in block order per (row, token), f32 rounding at each step:
//   Q4_0, Q5_0:           acc = acc + f32(isum) · (dw · dx)
//   Q4_1, Q5_1:           acc = acc + (f32(isum) · (dw · dx) + m · (dx · f32(Σqx)))
//   Q4_K, Q5_K, Q2_K:     acc = acc + ((dx · d) · f32(Σ sc·(q·qx)) − (dx · dmin) · f32(Σ mn·Σqx))
//   Q6_K, Q3_K:           acc = acc + (dx · d) · f32(Σ sc·(q·qx))
// Each weight block is unpacked once per row and multiplied by every token of the batch, so a
// batched call gives row t the bits of a T = 1 call; threads only split rows.
import { hsumI } from './common'
import {
  blockBytes,
  blockD,
  blockDmin,
  blockElems,
  MINS,
  SCALES,
  TYPE_Q2_K,
  TYPE_Q3_K,
  TYPE_Q4_1,
  TYPE_Q5_1,
  TYPE_Q6_K,
  unpack
} from './quant-unpack'

/** Σ of 16 i16 products (two vectors) as i32x4 lanes. */
@inline
function dot16(w: usize, x: usize): v128 {
  return i32x4.add(i32x4.dot_i16x8_s(v128.load(w), v128.load(x)), i32x4.dot_i16x8_s(v128.load(w + 16), v128.load(x + 16)))
}

/** [Σa, Σb, Σc, Σd]: four horizontal integer sums at once. */
@inline
function sum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const u0 = i32x4.add(v128.shuffle<i32>(a, b, 0, 4, 1, 5), v128.shuffle<i32>(a, b, 2, 6, 3, 7))
  const u1 = i32x4.add(v128.shuffle<i32>(c, d, 0, 4, 1, 5), v128.shuffle<i32>(c, d, 2, 6, 3, 7))
  return i32x4.add(v128.shuffle<i32>(u0, u1, 0, 1, 4, 5), v128.shuffle<i32>(u0, u1, 2, 3, 6, 7))
}

/** Σ scale[s]·(q·qx) over a 256-block of 16 sub-blocks of 16 (Q2_K, Q3_K, Q6_K). */
@inline
function kDot16(u: usize, x: usize): i32 {
  let acc = i32x4.splat(0)
  for (let s = 0; s < 16; s += 4) {
    const o = <usize>s << 5
    const d = sum4(dot16(u + o, x + o), dot16(u + o + 32, x + o + 32), dot16(u + o + 64, x + o + 64), dot16(u + o + 96, x + o + 96))
    acc = i32x4.add(acc, i32x4.mul(d, v128.load(u + SCALES + (<usize>s << 2))))
  }
  return hsumI(acc)
}

/** Σ scale[s]·(q·qx) over a 256-block of 8 sub-blocks of 32 (Q4_K, Q5_K). */
@inline
function kDot32(u: usize, x: usize): i32 {
  let acc = i32x4.splat(0)
  for (let s = 0; s < 8; s += 4) {
    const o = <usize>s << 6
    const d = sum4(
      i32x4.add(dot16(u + o, x + o), dot16(u + o + 32, x + o + 32)),
      i32x4.add(dot16(u + o + 64, x + o + 64), dot16(u + o + 96, x + o + 96)),
      i32x4.add(dot16(u + o + 128, x + o + 128), dot16(u + o + 160, x + o + 160)),
      i32x4.add(dot16(u + o + 192, x + o + 192), dot16(u + o + 224, x + o + 224))
    )
    acc = i32x4.add(acc, i32x4.mul(d, v128.load(u + SCALES + (<usize>s << 2))))
  }
  return hsumI(acc)
}

/** Σ min[s]·Σqx over the sub-blocks, from the activations' sums per 16 (bs). */
@inline
function kMins(u: usize, bs: usize, subLen: i32): i32 {
  let acc = 0
  if (subLen == 16) {
    for (let s = 0; s < 16; s++) acc += load<i32>(u + MINS + (<usize>s << 2)) * load<i32>(bs + (<usize>s << 2))
  } else {
    for (let s = 0; s < 8; s++)
      acc += load<i32>(u + MINS + (<usize>s << 2)) * (load<i32>(bs + (<usize>s << 3)) + load<i32>(bs + (<usize>s << 3) + 4))
  }
  return acc
}

/**
 * Rows [r0, r1) of out[T, rows] = W · x for a block-type W (ggml `type`). xq: i16 activations
 * [T, cols]; xd: f32 scales [T, cols / block]; bs: i32 Σq per 16 [T, cols / 16] (K-quants);
 * u: this thread's unpack area (quant-unpack.ts UNPACK_BYTES).
 */
export function matmulQuant(type: i32, w: usize, xq: usize, xd: usize, bs: usize, out: usize, rows: i32, cols: i32, T: i32, r0: i32, r1: i32, u: usize): void {
  const qk = blockElems(type)
  const nb = cols / qk
  const bb = blockBytes(type)
  const rb = <usize>nb * bb
  const xs = <usize>cols << 1
  const os = <usize>rows << 2
  const kQuant = qk == 256
  const subLen: i32 = type == TYPE_Q6_K || type == TYPE_Q3_K || type == TYPE_Q2_K ? 16 : 32
  const noMin = type == TYPE_Q6_K || type == TYPE_Q3_K
  const withMin = type == TYPE_Q4_1 || type == TYPE_Q5_1
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rb
    for (let t = 0; t < T; t++) store<f32>(out + <usize>t * os + (<usize>r << 2), 0)
    for (let b = 0; b < nb; b++) {
      unpack(type, wr + <usize>b * bb, u)
      const d = blockD
      const dmin = blockDmin
      for (let t = 0; t < T; t++) {
        const x = xq + <usize>t * xs + (<usize>(b * qk) << 1)
        const dx = load<f32>(xd + ((<usize>t * nb + b) << 2))
        const o = out + <usize>t * os + (<usize>r << 2)
        let acc = load<f32>(o)
        if (kQuant) {
          const sumi = subLen == 16 ? kDot16(u, x) : kDot32(u, x)
          const main: f32 = (dx * d) * <f32>sumi
          if (noMin) acc = acc + main
          else {
            const summ = kMins(u, bs + ((<usize>t * (cols >> 4) + (b << 4)) << 2), subLen)
            acc = acc + (main - (dx * dmin) * <f32>summ)
          }
        } else {
          const isum = hsumI(i32x4.add(dot16(u, x), dot16(u + 32, x + 32)))
          const main: f32 = <f32>isum * (d * dx)
          if (withMin) {
            let sx = 0
            for (let i = 0; i < 32; i++) sx += <i32>load<i16>(x + (<usize>i << 1))
            acc = acc + (main + dmin * (dx * <f32>sx))
          } else acc = acc + main
        }
        store<f32>(o, acc)
      }
    }
  }
}
