import { InvalidArgumentError, KernelMemoryError } from '../errors.js'
import type { AttentionShape, Kernels, KvLayer } from '../kernels.js'
import { createReferenceKernels } from '../kernels-ref.js'
import { matmulExact } from '../kernels-ref-exact.js'
import type { NativeAddon } from '../native/load.js'
import { NATIVE_BATCHED_FROM } from '../options.js'
import { rowBytes } from '../quant.js'
import { isQuantDType, QUANT_LAYOUTS } from '../quant-blocks.js'
import type { WeightMatrix } from '../types.js'
import { createFusedBlock } from './fused-block.js'
import { createWasmHeap } from './heap.js'
import * as L from './layout.js'
import { createThreadPool, type TaskEngine } from './pool.js'
import { createRopeTables } from './rope.js'
import { createScratch } from './scratch.js'
import { wasmApi, wasmKernelsModule } from './wasm-module.js'

/** Default share of the 4 GiB WebAssembly heap that weights take (WasmKernelOptions.heapWeightBytes). */
export const HEAP_WEIGHT_BYTES = 3 * 2 ** 30

export interface WasmKernelOptions {
  readonly threads: number
  /** Native addon (absolute path) that takes batched matmuls; null for WebAssembly only. */
  readonly native: NativeAddon | null
  /** Smallest batch T the native addon takes (default 8; decode stays in WebAssembly). */
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
  /** A KV layer in WebAssembly memory, zeroed; attention reads it in place. */
  allocKv(maxLength: number, kvDim: number, dtype: 'f32' | 'f16'): KvLayer
  freeKv(kv: KvLayer): void
  /** Resolves once every kernel thread has started (before that, calls run on fewer threads). */
  ready(): Promise<void>
  /** Bytes held in WebAssembly memory (weights, KV layers, scratch). */
  memoryBytes(): number
  /**
   * Streaming read bandwidth in GB/s of this kernel set's threads over a `bytes` buffer, best
   * of `repeats` passes: the memory roofline a decode step is measured against.
   */
  readBandwidth(bytes: number, repeats: number): number
}

/**
 * WebAssembly SIMD kernels on a shared memory with persistent worker threads. Weights are
 * copied into the shared memory once by prepare(); matmul and attention run on all threads,
 * each output element summed by one thread in a fixed order (bit-identical for any thread
 * count, and row t of a batch equals a T = 1 call). rmsnorm, swiglu are the reference code
 * (negligible in a profile); rope is the reference formula with per-call cos/sin tables.
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
  // Measured (bench/kernels.ts, this machine): native wins from T = 8 (1.3-1.9× f32, 1.9-3.8× q8_0);
  // below that its 16-token groups waste lanes and WebAssembly is as fast or faster.
  const nativeMinBatch = options.nativeMinBatch ?? NATIVE_BATCHED_FROM
  // Below that, the addon's decode kernels (shards/native/decode.cc, same bits) where it has
  // them: V8's WebAssembly code spills registers in the Q8_0 matvec and stays far from DRAM speed.
  const nativeDecode = options.nativeDecode ?? true
  const useNative = (dtype: WeightMatrix['dtype'], T: number): boolean =>
    native !== null &&
    (T >= nativeMinBatch || (nativeDecode && ((dtype === 'q8_0' && native.decodeQ8) || (dtype === 'f32' && native.decodeF32))))
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
  const weights = new WeakMap<WeightMatrix, number | null>()
  // Bytes of weights placed, and those left to the slow TypeScript kernels with the cause
  // (placement(): a node says so rather than serving slowly in silence).
  let weightBytes = 0
  const slow = new Map<string, number>()
  const noteSlow = (reason: string, bytes: number): void => void slow.set(reason, (slow.get(reason) ?? 0) + bytes)
  const HEAP_FULL = 'weights past the 4 GiB WebAssembly heap run on the TypeScript reference kernels (no native addon takes them)'
  // Weights past the WebAssembly heap, in native buffers (allocBuffer): address distance from
  // the heap's start (what the native kernels add to their base pointer), and their bytes.
  const external = new WeakMap<WeightMatrix, number>()
  let externalBytes = 0
  const canSpill = native !== null && typeof native.allocBuffer === 'function' && typeof native.addressOf === 'function'
  const heapAddress = canSpill ? (native.addressOf as (v: Uint8Array) => number)(memoryBase) : 0
  /** A native buffer for `bytes` of weights past the heap, or null without the addon. */
  const heapWeightBytes = options.heapWeightBytes ?? HEAP_WEIGHT_BYTES
  let heapWeights = 0
  function spill(bytes: number): { view: Uint8Array; delta: number } | null {
    if (!canSpill) return null
    const view = new Uint8Array((native.allocBuffer as (n: number) => ArrayBuffer)(bytes))
    externalBytes += bytes
    return { view, delta: (native.addressOf as (v: Uint8Array) => number)(view) - heapAddress }
  }
  const noQuantKernel = (dtype: string): string =>
    `${dtype} weights run on their TypeScript definition (the native addon with block-type kernels is not loaded)`
  /** Account for a placed matrix: its bytes, and whether (and why) it runs slowly. */
  function account(w: Omit<WeightMatrix, 'data'>, inHeap: boolean): void {
    const bytes = rowBytes(w.dtype, w.cols) * w.rows
    weightBytes += bytes
    if (!inHeap) noteSlow(HEAP_FULL, bytes)
    else if (isQuantDType(w.dtype) && !native?.quantTypes) noteSlow(noQuantKernel(w.dtype), bytes)
  }
  /** Weights in a native buffer run on native kernels only (WebAssembly cannot address them). */
  function accountExternal(w: Omit<WeightMatrix, 'data'>): void {
    weightBytes += rowBytes(w.dtype, w.cols) * w.rows
    if (isQuantDType(w.dtype) && !native?.quantTypes) noteSlow(noQuantKernel(w.dtype), rowBytes(w.dtype, w.cols) * w.rows)
  }
  const kvOffsets = new WeakMap<object, number>()
  const reclaim = new FinalizationRegistry<number>((offset) => heap.free(offset))

  function setArgs(values: number[]): void {
    const i32 = heap.i32()
    const base = L.ARGS_OFFSET >> 2
    for (let i = 0; i < values.length; i++) i32[base + i] = values[i] | 0
  }

  /**
   * Copy a weight matrix into the shared memory, else (heap full) into a native buffer
   * (`delta` set); null when neither can take it (reference fallback).
   */
  function place(w: WeightMatrix): { offset: number; view: Uint8Array; delta?: number } | null {
    const bytes = rowBytes(w.dtype, w.cols) * w.rows
    if (w.data.byteLength < bytes) throw new InvalidArgumentError(`weight data has ${w.data.byteLength} bytes, needs ${bytes}`)
    const offset = heapWeights + bytes <= heapWeightBytes || !canSpill ? tryAlloc(bytes) : null
    if (offset === null) {
      const spilled = spill(bytes)
      if (!spilled) return null
      spilled.view.set(w.data.subarray(0, bytes))
      return { offset: -1, view: spilled.view, delta: spilled.delta }
    }
    heapWeights += bytes
    const view = new Uint8Array(heap.memory.buffer, offset, bytes)
    view.set(w.data.subarray(0, bytes))
    return { offset, view }
  }

  /** A heap allocation, or null when the heap is full. */
  function tryAlloc(bytes: number): number | null {
    try {
      return heap.alloc(bytes)
    } catch (e) {
      if (e instanceof KernelMemoryError) return null
      throw e
    }
  }

  /** Heap offset of a weight matrix (placing it on first use); null when it is not in the heap. */
  function weightOffset(w: WeightMatrix): number | null {
    const known = weights.get(w)
    if (known !== undefined) return known
    if (external.has(w)) return null
    const placed = place(w)
    if (placed?.delta !== undefined) {
      external.set(w, placed.delta)
      return null
    }
    weights.set(w, placed?.offset ?? null)
    if (placed) reclaim.register(w, placed.offset)
    return placed?.offset ?? null
  }

  /** Address of a weight matrix as a distance from the heap's start (heap or native buffer). */
  function weightDelta(w: WeightMatrix): number | null {
    const offset = weightOffset(w)
    return offset ?? external.get(w) ?? null
  }

  const fused =
    native?.fusedBlock && nativeDecode && options.fusedBlock !== false
      ? createFusedBlock({
          heap,
          pool,
          scratch,
          native,
          // Batches of 8 or more use the batched kernels inside the block, as matmul() would.
          batchedFrom: nativeMinBatch,
          weightDelta,
          kvOffset: (a) => kvOffsets.get(a),
          setArgs
        })
      : null

  const kernels: FastKernels = {
    name: native ? 'wasm-simd+native' : 'wasm-simd',
    threads,

    prepare(w) {
      if (weights.has(w) || external.has(w)) return w
      const placed = place(w)
      if (placed?.delta !== undefined) {
        accountExternal(w)
        const prepared: WeightMatrix = { dtype: w.dtype, rows: w.rows, cols: w.cols, data: placed.view }
        external.set(prepared, placed.delta)
        return prepared
      }
      account(w, placed !== null)
      if (!placed) {
        weights.set(w, null)
        return w
      }
      const prepared: WeightMatrix = { dtype: w.dtype, rows: w.rows, cols: w.cols, data: placed.view }
      weights.set(prepared, placed.offset)
      reclaim.register(prepared, placed.offset)
      return prepared
    },

    prepareInto(shape, fill) {
      const bytes = rowBytes(shape.dtype, shape.cols) * shape.rows
      const offset = heapWeights + bytes <= heapWeightBytes || !canSpill ? tryAlloc(bytes) : null
      if (offset === null) {
        // Past the heap's share of weights (or its 4 GiB): a native buffer the native kernels
        // address directly.
        const spilled = spill(bytes)
        if (spilled) {
          fill(spilled.view)
          accountExternal(shape)
          const prepared: WeightMatrix = { dtype: shape.dtype, rows: shape.rows, cols: shape.cols, data: spilled.view }
          external.set(prepared, spilled.delta)
          return prepared
        }
        // No addon: an ordinary buffer, run by the reference kernels (reported by placement()).
        account(shape, false)
        const data = new Uint8Array(bytes)
        fill(data)
        const w: WeightMatrix = { ...shape, data }
        weights.set(w, null)
        return w
      }
      heapWeights += bytes
      const data = new Uint8Array(heap.memory.buffer, offset, bytes)
      try {
        fill(data)
      } catch (e) {
        heap.free(offset)
        heapWeights -= bytes
        throw e
      }
      const prepared: WeightMatrix = { dtype: shape.dtype, rows: shape.rows, cols: shape.cols, data }
      account(shape, true)
      weights.set(prepared, offset)
      reclaim.register(prepared, offset)
      return prepared
    },

    matmul(out, x, w, T) {
      const quant = isQuantDType(w.dtype)
      // Block types without the addon's kernels: their exact definition in TypeScript (same bits).
      if (quant && !native?.quantTypes) return matmulExact(out, x, w, T)
      const wp = weightOffset(w)
      const delta = wp === null ? external.get(w) : undefined
      if (wp === null && delta === undefined) return quant ? matmulExact(out, x, w, T) : ref.matmul(out, x, w, T)
      const { rows, cols } = w
      const xp = scratch.get('x', T * cols * 4)
      heap.f32().set(x.subarray(0, T * cols), xp >>> 2)
      const op = scratch.get('out', T * rows * 4)
      let args: number[]
      if (isQuantDType(w.dtype)) {
        args = [L.OP_MATMUL_QUANT, wp ?? 0, xp, QUANT_LAYOUTS[w.dtype].ggmlType, op, rows, cols, T]
      } else if (w.dtype === 'q8_0') {
        const xq = scratch.get('xq', T * cols * 2)
        const xd = scratch.get('xd', T * (cols / 32) * 4)
        exports.quantizeQ8(xp, xq, xd, cols, T)
        args = [L.OP_MATMUL_Q8, wp ?? 0, xq, xd, op, rows, cols, T]
      } else {
        args = [w.dtype === 'f32' ? L.OP_MATMUL_F32 : L.OP_MATMUL_F16, wp ?? 0, xp, 0, op, rows, cols, T]
      }
      // Slots 13-15: a weight in a native buffer (its i64 distance from the heap's start, then
      // the flag), always written so no earlier call's flag stays (shards/native/addon.cc).
      const d = delta ?? 0
      args.push(0, 0, 0, 0, 0, (d % 2 ** 32) | 0, Math.floor(d / 2 ** 32), delta === undefined ? 0 : 1)
      setArgs(args)
      pool.run(quant || delta !== undefined || useNative(w.dtype, T) ? 'native' : 'wasm')
      out.set(heap.f32().subarray(op >>> 2, (op >>> 2) + T * rows))
    },

    rmsnorm: ref.rmsnorm,
    swiglu: ref.swiglu,

    rope(x, T, nHeads, headDim, startPos, theta, freqs) {
      rope.apply(x, T, nHeads, headDim, startPos, theta, freqs)
    },

    attention(out, q, kv, shape) {
      // A q8_0 KV cache (shards/kv-cache.ts) has no fast attention kernel yet: the reference one.
      if (kv.dtype === 'q8_0') return ref.attention(out, q, kv, shape)
      attention(out, q, kv, shape)
    },

    blockForward: fused ? (x, T, startPos, w, kv, c) => fused.run(x, T, startPos, [w], [kv], c) : undefined,
    spanForward: fused ? (x, T, startPos, ws, kvs, c) => fused.run(x, T, startPos, ws, kvs, c) : undefined,

    allocKv(maxLength, kvDim, dtype) {
      const bytes = maxLength * kvDim * (dtype === 'f16' ? 2 : 4)
      const kp = heap.alloc(bytes)
      const vp = heap.alloc(bytes)
      const view = (p: number) =>
        dtype === 'f16'
          ? new Uint16Array(heap.memory.buffer, p, maxLength * kvDim)
          : new Float32Array(heap.memory.buffer, p, maxLength * kvDim)
      const keys = view(kp).fill(0)
      const values = view(vp).fill(0)
      kvOffsets.set(keys, kp)
      kvOffsets.set(values, vp)
      reclaim.register(keys, kp, keys)
      reclaim.register(values, vp, values)
      return { dtype, keys, values }
    },

    freeKv(kv) {
      for (const a of [kv.keys, kv.values]) {
        const p = kvOffsets.get(a)
        if (p === undefined) continue
        kvOffsets.delete(a)
        reclaim.unregister(a)
        heap.free(p)
      }
    },

    memoryBytes: () => heap.used(),
    placement: () => ({
      weightBytes,
      nativeBufferBytes: externalBytes,
      slowWeightBytes: [...slow.values()].reduce((a, b) => a + b, 0),
      reasons: [...slow.keys()]
    }),
    ready: () => pool.ready(),
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

  function attention(out: Float32Array, q: Float32Array, kv: KvLayer, shape: AttentionShape): void {
    const { T, startPos, nHeads, nKvHeads, headDim } = shape
    if (nKvHeads <= 0 || nHeads % nKvHeads !== 0)
      throw new InvalidArgumentError(`nHeads ${nHeads} is not a multiple of nKvHeads ${nKvHeads}`)
    const len = startPos + T
    const kvDim = nKvHeads * headDim
    const width = nHeads * headDim
    const f16 = kv.dtype === 'f16'
    const inCache = (a: Float32Array | Uint16Array, slot: string): number => {
      const p = kvOffsets.get(a)
      if (p !== undefined) return p
      // A KV layer from outside: copy the rows this call reads (allocKv avoids this).
      const n = len * kvDim
      const s = scratch.get(slot, n * (f16 ? 2 : 4))
      if (f16) heap.u16().set((a as Uint16Array).subarray(0, n), s >>> 1)
      else heap.f32().set((a as Float32Array).subarray(0, n), s >>> 2)
      return s
    }
    const kp = inCache(kv.keys as Float32Array | Uint16Array, 'k')
    const vp = inCache(kv.values as Float32Array | Uint16Array, 'v')
    const qp = scratch.get('q', T * width * 4)
    heap.f32().set(q.subarray(0, T * width), qp >>> 2)
    const op = scratch.get('ao', T * width * 4)
    const att = scratch.get('att', threads * ((len + 3) & ~3) * 4)
    setArgs([f16 ? L.OP_ATTENTION_F16 : L.OP_ATTENTION_F32, qp, kp, vp, op, T, startPos, nHeads, nKvHeads, headDim, att])
    pool.run('wasm')
    out.set(heap.f32().subarray(op >>> 2, (op >>> 2) + T * width))
  }

  return kernels
}
