import { InvalidArgumentError, KernelMemoryError } from '../../errors.js'
import type { NativeAddon } from '../../native/load.js'
import type { AttentionShape, KvLayer } from '../kernels.js'
import type { WasmHeap } from './heap.js'
import * as L from './layout.js'
import type { ThreadPool } from './pool.js'
import type { Scratch } from './scratch.js'

/**
 * KV layers and the WebAssembly attention kernel. With the native addon, KV layers live in
 * native buffers (allocBuffer: pages are only committed when written), which the fused native
 * block addresses directly, so a span's KV never competes with its weights for the 4 GiB heap.
 * Without it they live in the heap, where WebAssembly attention reads them in place; when the
 * heap is full, in ordinary memory (copied in per call, counted in kvOutsideBytes). A KV layer
 * the heap does not hold is copied in per WebAssembly attention call. Attention splits
 * (token, head) items over the threads; each item is one thread's fixed-order sum, so any
 * thread count gives the same bits.
 */
export interface KvAttention {
  allocKv(maxLength: number, kvDim: number, dtype: 'f32' | 'f16'): KvLayer
  freeKv(kv: KvLayer): void
  /** Address of a KV layer's keys or values from allocKv as a distance from the heap's start. */
  kvDelta(a: Float32Array | Uint16Array | Uint8Array): number | undefined
  /** Where allocKv puts KV layers: 'native' buffers or the WebAssembly 'heap'. */
  readonly kvMemory: 'native' | 'heap'
  /** Bytes of KV layers allocKv left in ordinary memory because the heap was full (copied per call). */
  kvOutsideBytes(): number
  /** Bytes of live (not freed) KV layers in native buffers. */
  kvNativeBytes(): number
  attention(out: Float32Array, q: Float32Array, kv: KvLayer, shape: AttentionShape): void
}

export interface KvAttentionDeps {
  readonly heap: WasmHeap
  readonly scratch: Scratch
  readonly pool: ThreadPool
  readonly threads: number
  readonly native: NativeAddon | null
  setArgs(values: number[]): void
}

export function createKvAttention(deps: KvAttentionDeps): KvAttention {
  const { heap, scratch, pool, threads, setArgs, native } = deps
  // Heap offsets of KV layers in the heap; distances from the heap's start of those in native buffers.
  const kvOffsets = new WeakMap<object, number>()
  const kvNative = new WeakMap<object, number>()
  const reclaim = new FinalizationRegistry<number>((offset) => heap.free(offset))
  const allocBuffer = native?.allocBuffer
  const addressOf = native?.addressOf
  const inNative = allocBuffer !== undefined && addressOf !== undefined
  const heapAddress = inNative ? addressOf(new Uint8Array(heap.memory.buffer, 0, 1)) : 0
  let outsideBytes = 0
  let nativeBytes = 0

  /** Keys or values of one layer: a native buffer, else the heap, else (heap full) ordinary memory. */
  function layerArray(n: number, dtype: 'f32' | 'f16'): Float32Array | Uint16Array {
    const bytes = n * (dtype === 'f16' ? 2 : 4)
    if (inNative) {
      const buffer = allocBuffer(bytes)
      const a = dtype === 'f16' ? new Uint16Array(buffer) : new Float32Array(buffer)
      kvNative.set(a, addressOf(new Uint8Array(buffer, 0, 1)) - heapAddress)
      nativeBytes += bytes
      return a
    }
    let p: number
    try {
      p = heap.alloc(bytes)
    } catch (e) {
      if (!(e instanceof KernelMemoryError)) throw e
      outsideBytes += bytes
      return dtype === 'f16' ? new Uint16Array(n) : new Float32Array(n)
    }
    const a = dtype === 'f16' ? new Uint16Array(heap.memory.buffer, p, n) : new Float32Array(heap.memory.buffer, p, n)
    a.fill(0)
    kvOffsets.set(a, p)
    reclaim.register(a, p, a)
    return a
  }

  return {
    kvMemory: inNative ? 'native' : 'heap',
    kvOutsideBytes: () => outsideBytes,
    kvNativeBytes: () => nativeBytes,

    allocKv(maxLength, kvDim, dtype) {
      const keys = layerArray(maxLength * kvDim, dtype)
      const values = layerArray(maxLength * kvDim, dtype)
      return { dtype, keys, values }
    },

    freeKv(kv) {
      for (const a of [kv.keys, kv.values]) {
        // Native buffers are unmapped when their last view is collected.
        if (kvNative.delete(a)) nativeBytes -= a.byteLength
        const p = kvOffsets.get(a)
        if (p === undefined) continue
        kvOffsets.delete(a)
        reclaim.unregister(a)
        heap.free(p)
      }
    },

    kvDelta: (a) => kvOffsets.get(a) ?? kvNative.get(a),

    attention(out, q, kv, shape) {
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
  }
}
