import type { NativeAddon } from '../../native/load.js'
import { isQuantDType, QUANT_LAYOUTS } from '../../quant/quant-blocks.js'
import type { WeightMatrix } from '../../types.js'
import { createReferenceKernels } from '../kernels-ref.js'
import { matmulExact } from '../kernels-ref-exact.js'
import { quantizeActivationsQ8K } from '../kernels-ref-exact-quant.js'
import type { WasmHeap } from './heap.js'
import * as L from './layout.js'
import type { ThreadPool } from './pool.js'
import type { Scratch } from './scratch.js'
import type { WeightStore } from './weight-store.js'

/** Bytes of one thread's block-unpack area (shards/asm/quant-unpack.ts UNPACK_BYTES). */
const UNPACK_BYTES = 1024

export interface MatmulDeps {
  readonly heap: WasmHeap
  readonly scratch: Scratch
  readonly pool: ThreadPool
  readonly store: WeightStore
  readonly native: NativeAddon | null
  readonly threads: number
  /** Smallest batch the native addon takes (below it WebAssembly, or the addon's decode kernels). */
  readonly nativeMinBatch: number
  /** Use the addon's decode kernels below nativeMinBatch where it has them. */
  readonly nativeDecode: boolean
  /** The calibrated routes (shards/kernels/kernel-calibration.ts): which weight dtype and shape stay off the addon. */
  readonly routes: NativeRoutes
  readonly quantizeQ8: (x: number, xq: number, xd: number, cols: number, T: number) => void
  setArgs(values: number[]): void
}

/** The two shape classes a calibration measures: decode (T below the batched threshold) and batched. */
export type ShapeClass = 'decode' | 'batched'

/**
 * Which engine takes a matmul (issue 40: kernels chosen by measurement). `avoid` holds
 * `${dtype}:${shapeClass}` keys the addon measured slower on than WebAssembly, which then stay
 * on WebAssembly; `force` pins every call to one engine while a calibration measures it. Weights
 * in native buffers always go native (WebAssembly cannot reach them).
 */
export interface NativeRoutes {
  avoid: ReadonlySet<string>
  force: 'native' | 'wasm' | null
}

export function routeKey(dtype: WeightMatrix['dtype'], shape: ShapeClass): string {
  return `${dtype}:${shape}`
}

/**
 * out[T, rows] = x[T, cols] · wᵀ on the fast kernels. Every dtype has a WebAssembly SIMD kernel
 * (shards/asm/); the native addon takes batches from nativeMinBatch, decode where it has the
 * kernels, every block type when it has them (same bits: kernels-ref-exact*.ts), and weights in
 * native buffers. A weight in neither memory runs on the TypeScript definitions (same bits).
 */
export function createMatmul(deps: MatmulDeps): (out: Float32Array, x: Float32Array, w: WeightMatrix, T: number) => void {
  const { heap, scratch, pool, store, native, threads } = deps
  const ref = createReferenceKernels()
  const { routes } = deps
  const useNative = (dtype: WeightMatrix['dtype'], T: number): boolean =>
    native !== null &&
    routes.force !== 'wasm' &&
    (routes.force === 'native' || !routes.avoid.has(routeKey(dtype, T >= deps.nativeMinBatch ? 'batched' : 'decode'))) &&
    (isQuantDType(dtype)
      ? native.quantTypes
      : T >= deps.nativeMinBatch ||
        (deps.nativeDecode && ((dtype === 'q8_0' && native.decodeQ8) || (dtype === 'f32' && native.decodeF32))))

  /** Block-type activations for the WebAssembly kernel: [xq (i16), xd (f32), Σq per 16 (i32)]. */
  function blockActivations(w: WeightMatrix, x: Float32Array, xp: number, T: number): [number, number, number] {
    const { cols } = w
    const xq = scratch.get('xq', T * cols * 2)
    if (QUANT_LAYOUTS[w.dtype as keyof typeof QUANT_LAYOUTS].activations === 'q8_0') {
      const xd = scratch.get('xd', T * (cols / 32) * 4)
      deps.quantizeQ8(xp, xq, xd, cols, T)
      return [xq, xd, 0]
    }
    // Q8_K: the exact TypeScript quantiser (O(T·cols), small beside the matmul), widened to i16.
    const a = quantizeActivationsQ8K(x, cols, T)
    const xd = scratch.get('xd', a.d.byteLength)
    const bs = scratch.get('bs', a.bsums.byteLength)
    new Int16Array(heap.memory.buffer, xq, T * cols).set(a.q)
    heap.f32().set(a.d, xd >>> 2)
    heap.i32().set(a.bsums, bs >>> 2)
    return [xq, xd, bs]
  }

  return function matmul(out, x, w, T) {
    const quant = isQuantDType(w.dtype)
    const wp = store.heapOffset(w)
    const delta = wp === null ? store.externalDelta(w) : undefined
    const nativeTakes = delta !== undefined ? native !== null && (!quant || native.quantTypes) : useNative(w.dtype, T)
    if (wp === null && !nativeTakes) return quant ? matmulExact(out, x, w, T) : ref.matmul(out, x, w, T)
    const { rows, cols } = w
    const xp = scratch.get('x', T * cols * 4)
    heap.f32().set(x.subarray(0, T * cols), xp >>> 2)
    const op = scratch.get('out', T * rows * 4)
    let args: number[]
    if (quant && nativeTakes) {
      // The type code carries the store's layout flag (rows8 matrices: quant-layout.h).
      const type = QUANT_LAYOUTS[w.dtype as keyof typeof QUANT_LAYOUTS].ggmlType | store.layoutFlag(w)
      args = [L.OP_MATMUL_QUANT, wp ?? 0, xp, type, op, rows, cols, T]
    } else if (w.dtype === 'bf16') {
      args = [L.OP_MATMUL_BF16, wp ?? 0, xp, 0, op, rows, cols, T]
    } else if (quant) {
      const [xq, xd, bs] = blockActivations(w, x, xp, T)
      const unpack = scratch.get('unpack', threads * UNPACK_BYTES)
      args = [
        L.OP_MATMUL_BLOCKS,
        wp ?? 0,
        xq,
        xd,
        op,
        rows,
        cols,
        T,
        QUANT_LAYOUTS[w.dtype as keyof typeof QUANT_LAYOUTS].ggmlType,
        bs,
        unpack
      ]
    } else if (w.dtype === 'q8_0') {
      const xq = scratch.get('xq', T * cols * 2)
      const xd = scratch.get('xd', T * (cols / 32) * 4)
      deps.quantizeQ8(xp, xq, xd, cols, T)
      args = [L.OP_MATMUL_Q8, wp ?? 0, xq, xd, op, rows, cols, T]
    } else {
      args = [w.dtype === 'f32' ? L.OP_MATMUL_F32 : L.OP_MATMUL_F16, wp ?? 0, xp, 0, op, rows, cols, T]
    }
    // Slots 13-15: a weight in a native buffer (its i64 distance from the heap's start, then
    // the flag), always written so no earlier call's flag stays (shards/native/addon.cc).
    while (args.length < 13) args.push(0)
    const d = delta ?? 0
    args.push((d % 2 ** 32) | 0, Math.floor(d / 2 ** 32), delta === undefined ? 0 : 1)
    deps.setArgs(args)
    pool.run(nativeTakes ? 'native' : 'wasm')
    out.set(heap.f32().subarray(op >>> 2, (op >>> 2) + T * rows))
  }
}
