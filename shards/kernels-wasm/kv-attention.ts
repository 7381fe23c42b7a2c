import { InvalidArgumentError } from '../errors.js'
import type { AttentionShape, KvLayer } from '../kernels.js'
import type { WasmHeap } from './heap.js'
import * as L from './layout.js'
import type { ThreadPool } from './pool.js'
import type { Scratch } from './scratch.js'

/**
 * KV layers in the WebAssembly heap and the attention kernel that reads them in place (a KV
 * layer from elsewhere is copied in per call). Attention splits (token, head) items over the
 * threads; each item is one thread's fixed-order sum, so any thread count gives the same bits.
 */
export interface KvAttention {
  allocKv(maxLength: number, kvDim: number, dtype: 'f32' | 'f16'): KvLayer
  freeKv(kv: KvLayer): void
  /** Heap offset of a KV layer's keys or values from allocKv, undefined otherwise. */
  kvOffset(a: Float32Array | Uint16Array | Uint8Array): number | undefined
  attention(out: Float32Array, q: Float32Array, kv: KvLayer, shape: AttentionShape): void
}

export interface KvAttentionDeps {
  readonly heap: WasmHeap
  readonly scratch: Scratch
  readonly pool: ThreadPool
  readonly threads: number
  setArgs(values: number[]): void
}

export function createKvAttention(deps: KvAttentionDeps): KvAttention {
  const { heap, scratch, pool, threads, setArgs } = deps
  const kvOffsets = new WeakMap<object, number>()
  const reclaim = new FinalizationRegistry<number>((offset) => heap.free(offset))

  return {
    allocKv(maxLength, kvDim, dtype) {
      const bytes = maxLength * kvDim * (dtype === 'f16' ? 2 : 4)
      const kp = heap.alloc(bytes)
      let vp: number
      try {
        vp = heap.alloc(bytes)
      } catch (e) {
        heap.free(kp)
        throw e
      }
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

    kvOffset: (a) => kvOffsets.get(a),

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
