import type { NativeAddon } from '../../native/load.js'
import { NATIVE_BATCHED_FROM } from '../../options.js'
import type { Kernels, KvLayer } from '../kernels.js'
import { createReferenceKernels } from '../kernels-ref.js'
import { createFusedBlock } from './fused-block.js'
import { createWasmHeap } from './heap.js'
import { createKvAttention } from './kv-attention.js'
import * as L from './layout.js'
import { createMatmul, type NativeRoutes } from './matmul-dispatch.js'
import { createThreadPool, type TaskEngine } from './pool.js'
import { createRopeTables } from './rope.js'
import { createScratch } from './scratch.js'
import { wasmApi, wasmKernelsModule } from './wasm-module.js'
import { createWeightStore } from './weight-store.js'

/** Default share of the 4 GiB WebAssembly heap that weights take (WasmKernelOptions.heapWeightBytes). */
export const HEAP_WEIGHT_BYTES = 3 * 2 ** 30

export interface WasmKernelOptions {
  readonly threads: number
  /** Native addon (absolute path) that takes batched matmuls; null for WebAssembly only. */
  readonly native: NativeAddon | null
  /** Smallest batch T the native addon takes (default NATIVE_BATCHED_FROM; decode stays in WebAssembly). */
  readonly nativeMinBatch?: number
  /** Use the addon's decode kernels for T < nativeMinBatch when it has them (default true). */
  readonly nativeDecode?: boolean
  /** Run a whole block in one native call when the addon has it (default true; any batch size). */
  readonly fusedBlock?: boolean
  /** Ask the OS for huge pages under the kernel memory through the addon (default true). */
  readonly hugePages?: boolean
  /**
   * Bytes of weights the WebAssembly heap takes at most (default HEAP_WEIGHT_BYTES: 3 of its
   * 4 GiB, the rest left to KV caches and scratch). Past it, weights go to native buffers the
   * native kernels address directly, when the addon makes them; tests set 0 to take that path.
   */
  readonly heapWeightBytes?: number
}

/** Kernels that also hand out KV layers living in the kernels' own memory (no copy per call). */
export interface FastKernels extends Kernels {
  readonly threads: number
  /** A KV layer, zeroed, in native buffers with the addon, else in WebAssembly memory; attention reads it in place. */
  allocKv(maxLength: number, kvDim: number, dtype: 'f32' | 'f16'): KvLayer
  freeKv(kv: KvLayer): void
  /** Resolves once every kernel thread has started (before that, calls run on fewer threads). */
  ready(): Promise<void>
  /** Bytes held in WebAssembly memory (weights, KV layers, scratch) and in native KV buffers. */
  memoryBytes(): number
  /**
   * Streaming read bandwidth in GB/s of this kernel set's threads over a `bytes` buffer, best
   * of `repeats` passes: the memory roofline a decode step is measured against.
   */
  readBandwidth(bytes: number, repeats: number): number
  /**
   * Keep the `${dtype}:${decode|batched}` classes in `avoid` off the native addon (a calibration
   * measured WebAssembly faster there: shards/kernels/kernel-calibration.ts), or pin every matmul to one
   * engine while measuring (`force`, null to release). Both engines give the same bits.
   */
  setNativeRoutes(routes: { avoid?: ReadonlySet<string>; force?: 'native' | 'wasm' | null }): void
  /** The classes setNativeRoutes keeps off the addon, sorted. */
  avoidedNative(): string[]
  /** Whether the native addon is loaded (the routes matter only then). */
  readonly hasNative: boolean
}

/**
 * WebAssembly SIMD kernels on a shared memory with persistent worker threads. Weights are
 * copied into the shared memory once by prepare() (weight-store.ts); matmul (matmul-dispatch.ts)
 * and attention (kv-attention.ts) run on all threads, each output element summed by one thread
 * in a fixed order (bit-identical for any thread count, and row t of a batch equals a T = 1
 * call). rmsnorm, swiglu are the reference code (negligible in a profile); rope is the
 * reference formula with per-call cos/sin tables.
 */
export function createWasmKernels(options: WasmKernelOptions): FastKernels {
  const threads = Math.max(1, Math.floor(options.threads))
  const module = wasmKernelsModule()
  const advise = options.hugePages !== false ? options.native?.adviseHugePages : undefined
  // Weights are written right after the memory grows, so advising each new stretch first
  // puts them on huge pages (whole heap each time: the advice is idempotent).
  const heap = createWasmHeap(
    32,
    advise ? (buffer) => void advise(new Uint8Array(buffer, 0, 1), 0, buffer.byteLength) : undefined
  )
  const exports = new wasmApi!.Instance(module, { env: { memory: heap.memory } }).exports as unknown as {
    task(tid: number, n: number): void
    quantizeQ8(x: number, xq: number, xd: number, cols: number, T: number): void
  }
  const native = options.native
  const memoryBase = new Uint8Array(heap.memory.buffer, 0, 1)
  // Measured (bench/kernels.ts, this machine): native wins from T = NATIVE_BATCHED_FROM; below
  // that its 16-token groups waste lanes and WebAssembly is as fast or faster.
  const nativeMinBatch = options.nativeMinBatch ?? NATIVE_BATCHED_FROM
  // Below that, the addon's decode kernels (shards/native/decode.cc, same bits) where it has
  // them: V8's WebAssembly code spills registers in the Q8_0 matvec and stays far from DRAM speed.
  const nativeDecode = options.nativeDecode ?? true
  const pool = createThreadPool({
    module,
    memory: heap.memory,
    threads,
    nativePath: native?.path ?? null,
    mainTask: (engine: TaskEngine, tid, n) =>
      engine === 'native' && native ? native.task(memoryBase, tid, n) : exports.task(tid, n)
  })
  const ref = createReferenceKernels()
  const scratch = createScratch(heap)
  const rope = createRopeTables()
  const store = createWeightStore({ heap, native, heapWeightBytes: options.heapWeightBytes ?? HEAP_WEIGHT_BYTES })

  function setArgs(values: number[]): void {
    const i32 = heap.i32()
    const base = L.ARGS_OFFSET >> 2
    for (let i = 0; i < values.length; i++) i32[base + i] = values[i] | 0
  }

  const routes: NativeRoutes = { avoid: new Set(), force: null }
  const kv = createKvAttention({ heap, scratch, pool, threads, native, setArgs })
  const matmul = createMatmul({
    heap,
    scratch,
    pool,
    store,
    native,
    threads,
    nativeMinBatch,
    nativeDecode,
    routes,
    quantizeQ8: exports.quantizeQ8,
    setArgs
  })
  const fused =
    native?.fusedBlock && nativeDecode && options.fusedBlock !== false
      ? createFusedBlock({
          heap,
          pool,
          scratch,
          native,
          // Batches from nativeMinBatch use the batched kernels inside the block, as matmul() would.
          batchedFrom: nativeMinBatch,
          routes,
          weightDelta: store.weightDelta,
          layoutFlag: store.layoutFlag,
          kvDelta: kv.kvDelta,
          setArgs
        })
      : null

  return {
    name: native ? 'wasm-simd+native' : 'wasm-simd',
    threads,
    prepare: store.prepare,
    prepareInto: store.prepareInto,
    matmul,
    rmsnorm: ref.rmsnorm,
    swiglu: ref.swiglu,

    rope(x, T, nHeads, headDim, startPos, theta, freqs) {
      rope.apply(x, T, nHeads, headDim, startPos, theta, freqs)
    },

    attention(out, q, layer, shape) {
      // A q8_0 KV cache (shards/kv-cache.ts) has no fast attention kernel yet: the reference one.
      if (layer.dtype === 'q8_0') return ref.attention(out, q, layer, shape)
      kv.attention(out, q, layer, shape)
    },

    blockForward: fused ? (x, T, startPos, w, l, c) => fused.run(x, T, startPos, [w], [l], c) : undefined,
    spanForward: fused ? (x, T, startPos, ws, ls, c) => fused.run(x, T, startPos, ws, ls, c) : undefined,
    allocKv: kv.allocKv,
    freeKv: kv.freeKv,
    memoryBytes: () => heap.used() + kv.kvNativeBytes(),
    placement: () => ({
      ...store.placement(),
      kvMemory: kv.kvMemory,
      kvHeapFreeBytes: Math.max(0, L.MAX_PAGES * L.PAGE - heap.used())
    }),
    ready: () => pool.ready(),
    hasNative: native !== null,
    avoidedNative: () => [...routes.avoid].sort(),
    setNativeRoutes(next) {
      if (next.avoid) routes.avoid = new Set(next.avoid)
      if (next.force !== undefined) routes.force = next.force
    },
    rest: () => pool.rest(),

    readBandwidth(bytes, repeats) {
      const size = Math.ceil(bytes / (64 * threads)) * 64 * threads
      const src = heap.alloc(size)
      const res = heap.alloc(16 * threads)
      try {
        heap.u8().fill(1, src, src + size)
        let best = Number.POSITIVE_INFINITY
        for (let i = 0; i < repeats; i++) {
          setArgs([L.OP_STREAM, src, size, res])
          const t0 = process.hrtime.bigint()
          pool.run('wasm')
          best = Math.min(best, Number(process.hrtime.bigint() - t0))
        }
        return size / best
      } finally {
        heap.free(src)
        heap.free(res)
      }
    },

    close() {
      pool.close()
    }
  }
}
