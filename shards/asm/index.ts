// Entry point of the WebAssembly kernel module. The host writes an op code and its arguments
// into the ARGS block of the shared memory, then every thread (main + workers) calls
// task(tid, n) and does its own share; see shards/kernels/wasm/layout.ts for the slots.
import { ARGS, arg, chunkEnd, chunkStart } from './common'
import { attention } from './attention'
import { matmulF } from './matmul-f'
import { matmulQ8, quantizeQ8 } from './matmul-q8'
import { matmulQuant } from './matmul-quant'
import { UNPACK_BYTES } from './quant-unpack'

export { quantizeQ8 }

export const OP_MATMUL_F32: i32 = 1
export const OP_MATMUL_F16: i32 = 2
export const OP_MATMUL_Q8: i32 = 3
export const OP_ATTENTION_F32: i32 = 4
export const OP_ATTENTION_F16: i32 = 5
export const OP_STREAM: i32 = 6
export const OP_MATMUL_BLOCKS: i32 = 9
export const OP_MATMUL_BF16: i32 = 10

export function argsOffset(): usize {
  return ARGS
}

export function task(tid: i32, n: i32): void {
  const op = arg(0)
  if (op == OP_MATMUL_BLOCKS) {
    // slots: 1 w, 2 xq (i16), 3 xd, 4 out, 5 rows, 6 cols, 7 T, 8 ggml type, 9 Σq per 16, 10 unpack areas
    const rows = arg(5)
    const r0 = chunkStart(rows, tid, n)
    const r1 = chunkEnd(rows, tid, n)
    if (r0 >= r1) return
    const u = <usize>arg(10) + <usize>tid * UNPACK_BYTES
    matmulQuant(arg(8), <usize>arg(1), <usize>arg(2), <usize>arg(3), <usize>arg(9), <usize>arg(4), rows, arg(6), arg(7), r0, r1, u)
  } else if (op == OP_MATMUL_F32 || op == OP_MATMUL_F16 || op == OP_MATMUL_Q8 || op == OP_MATMUL_BF16) {
    // slots: 1 w, 2 x (f32 or i16 quants), 3 xd, 4 out, 5 rows, 6 cols, 7 T
    const rows = arg(5)
    const r0 = chunkStart(rows, tid, n)
    const r1 = chunkEnd(rows, tid, n)
    if (r0 >= r1) return
    const w = <usize>arg(1)
    const x = <usize>arg(2)
    const out = <usize>arg(4)
    if (op == OP_MATMUL_F32) matmulF<f32>(w, x, out, rows, arg(6), arg(7), r0, r1)
    else if (op == OP_MATMUL_F16) matmulF<u16>(w, x, out, rows, arg(6), arg(7), r0, r1)
    else if (op == OP_MATMUL_BF16) matmulF<i16>(w, x, out, rows, arg(6), arg(7), r0, r1)
    else matmulQ8(w, x, <usize>arg(3), out, rows, arg(6), arg(7), r0, r1)
  } else if (op == OP_STREAM) {
    // slots: 1 src, 2 bytes (multiple of 64 * n), 3 result (i32 per thread). Read-bandwidth probe.
    const per = <usize>(arg(2) / n) & ~63
    store<v128>(<usize>arg(3) + (<usize>tid << 4), streamRead(<usize>arg(1) + <usize>tid * per, per))
  } else if (op == OP_ATTENTION_F32 || op == OP_ATTENTION_F16) {
    // slots: 1 q, 2 k, 3 v, 4 out, 5 T, 6 startPos, 7 nHeads, 8 nKvHeads, 9 headDim, 10 scratch
    const T = arg(5)
    const startPos = arg(6)
    const nHeads = arg(7)
    const items = T * nHeads
    const i0 = <i32>((<i64>items * tid) / n)
    const i1 = <i32>((<i64>items * (tid + 1)) / n)
    if (i0 >= i1) return
    const att = <usize>arg(10) + <usize>tid * (<usize>((startPos + T + 3) & ~3) << 2)
    if (op == OP_ATTENTION_F32) attention<f32>(<usize>arg(1), <usize>arg(2), <usize>arg(3), <usize>arg(4), T, startPos, nHeads, arg(8), arg(9), att, i0, i1)
    else attention<u16>(<usize>arg(1), <usize>arg(2), <usize>arg(3), <usize>arg(4), T, startPos, nHeads, arg(8), arg(9), att, i0, i1)
  }
}

/** Streams `bytes` from `src` with four independent integer accumulators (memory roofline probe). */
function streamRead(src: usize, bytes: usize): v128 {
  let a = i32x4.splat(0)
  let b = i32x4.splat(0)
  let c = i32x4.splat(0)
  let d = i32x4.splat(0)
  for (let p = src; p < src + bytes; p += 64) {
    a = i32x4.add(a, v128.load(p))
    b = i32x4.add(b, v128.load(p + 16))
    c = i32x4.add(c, v128.load(p + 32))
    d = i32x4.add(d, v128.load(p + 48))
  }
  return i32x4.add(i32x4.add(a, b), i32x4.add(c, d))
}
