import { ropeFrequencies } from '../../model/architectures.js'
import type { NativeAddon } from '../../native/load.js'
import { NATIVE_BATCHED_FROM } from '../../options.js'
import { isQuantDType, QUANT_LAYOUTS } from '../../quant/quant-blocks.js'
import type { ModelConfig, WeightMatrix } from '../../types.js'
import type { BlockMatrices, KvLayer } from '../kernels.js'
import type { WasmHeap } from './heap.js'
import * as L from './layout.js'
import { type NativeRoutes, routeKey } from './matmul-dispatch.js'
import type { ThreadPool } from './pool.js'
import type { Scratch } from './scratch.js'

/**
 * Host side of the native block (shards/native/block.cc): one pool dispatch runs a whole
 * block on a batch (a decode step, or a piece of a prefill), instead of one dispatch per matmul plus attention, RoPE,
 * RMSNorm and SwiGLU in JavaScript between them. Same bits as the op-by-op path (the native
 * ops reproduce kernels-ref.ts rmsnorm/rope/swiglu and the WebAssembly attention exactly).
 */
export interface FusedBlock {
  /** Run blocks ws[i] (KV layers kvs[i]) in turn in one call, or return false when this case is not one it takes. */
  run(
    x: Float32Array,
    T: number,
    startPos: number,
    ws: readonly BlockMatrices[],
    kvs: readonly KvLayer[],
    c: ModelConfig
  ): boolean
}

export interface FusedBlockDeps {
  readonly heap: WasmHeap
  readonly pool: ThreadPool
  readonly scratch: Scratch
  readonly native: NativeAddon
  /** Batch size from which matmul() hands rows to the batched native kernels (block.cc agrees). */
  readonly batchedFrom: number
  /** Calibrated routes (matmul-dispatch.ts): a block with a matrix kept off the addon is not fused. */
  readonly routes: NativeRoutes
  /** Offset of a weight matrix in the heap, null when it lives outside. */
  /** Address of a weight matrix as a distance from the heap's start (heap or native buffer), null when neither. */
  weightDelta(w: WeightMatrix): number | null
  /** Bits OR-ed into a block-type matrix's type code (weight-store.ts ROWS8). */
  layoutFlag(w: WeightMatrix): number
  /** Address of a KV layer's keys or values (allocKv) as a distance from the heap's start (heap or native buffer), undefined otherwise. */
  kvDelta(a: Float32Array | Uint16Array | Uint8Array): number | undefined
  setArgs(values: number[]): void
}

export function createFusedBlock(deps: FusedBlockDeps): FusedBlock {
  const { heap, pool, scratch, native } = deps
  const norms = new WeakMap<Float32Array, number>()
  const reclaim = new FinalizationRegistry<number>((offset) => heap.free(offset))
  const eps = new Float64Array(1)
  const epsBytes = new Uint8Array(eps.buffer)
  let ropeKey = ''
  let ropeConfig: ModelConfig | null = null
  const freqsOf = new WeakMap<ModelConfig, Float64Array>()

  /** A norm vector copied into the heap once (it is read by every thread of every call). */
  function normOffset(v: Float32Array): number {
    const known = norms.get(v)
    if (known !== undefined) return known
    const at = heap.alloc(v.byteLength)
    heap.f32().set(v, at >>> 2)
    norms.set(v, at)
    reclaim.register(v, at)
    return at
  }

  /** cos/sin (float64, as shards/kernels/wasm/rope.ts computes them) of positions startPos.. */
  function ropeTable(T: number, startPos: number, c: ModelConfig): number {
    const half = c.headDim >> 1
    const at = scratch.get('blk-rope', T * half * 16)
    const key = `${at}/${T}/${startPos}`
    if (key === ropeKey && c === ropeConfig) return at
    let freqs = freqsOf.get(c)
    if (!freqs) {
      freqs = ropeFrequencies(c)
      freqsOf.set(c, freqs)
    }
    const table = new Float64Array(heap.memory.buffer, at, 2 * T * half)
    for (let t = 0; t < T; t++) {
      const pos = startPos + t
      for (let j = 0; j < half; j++) {
        const val = pos * freqs[j]
        table[t * half + j] = Math.cos(val)
        table[T * half + t * half + j] = Math.sin(val)
      }
    }
    ropeKey = key
    ropeConfig = c
    return at
  }

  /** The descriptor slots of one block (shards/native/block.h), or null when it does not qualify. */
  function blockSlots(
    w: BlockMatrices,
    kv: KvLayer,
    c: ModelConfig,
    T: number,
    startPos: number,
    at: Record<string, number> & { types?: number[]; weights?: number[]; kv?: number[] }
  ): number[] | null {
    const mats = [w.wqkv, w.wo, w.w13, w.w2]
    // Per matrix: f32, Q8_0, or a block type when the addon multiplies those (quant-dot.cc).
    const shape = T >= deps.batchedFrom ? 'batched' : 'decode'
    const typeOf = (m: WeightMatrix): number | null =>
      deps.routes.force === 'wasm' || (deps.routes.force !== 'native' && deps.routes.avoid.has(routeKey(m.dtype, shape)))
        ? null
        : m.dtype === 'f32'
          ? 0
          : m.dtype === 'q8_0'
            ? 8
            : isQuantDType(m.dtype) && native.quantTypes
              ? QUANT_LAYOUTS[m.dtype].ggmlType | deps.layoutFlag(m)
              : null
    const types = mats.map(typeOf)
    const wvType = w.wv ? typeOf(w.wv) : 0
    if (types.some((t) => t === null) || wvType === null) return null
    const offsets = mats.map((m) => deps.weightDelta(m))
    const wvOffset = w.wv ? deps.weightDelta(w.wv) : 0
    const kp = deps.kvDelta(kv.keys)
    const vp = deps.kvDelta(kv.values)
    if (offsets.some((o) => o === null) || wvOffset === null || kp === undefined || vp === undefined) return null
    at.types = [...(types as number[]), w.wv ? 1 : 0, wvType]
    // i64 weight addresses (block.h BLOCK_DESC_WEIGHTS_BYTE), as low/high i32 halves.
    const i64 = (d: number): number[] => [(d % 2 ** 32) | 0, Math.floor(d / 2 ** 32)]
    at.weights = [...(offsets as number[]), wvOffset].flatMap(i64)
    // KV layers in the heap or in native buffers (allocKv): i64 distances (BLOCK_DESC_KV_BYTE).
    at.kv = [...i64(kp), ...i64(vp)]
    return [
      types[0] === 8 ? 1 : 0,
      c.dim,
      c.kvDim,
      c.hiddenDim,
      c.nHeads,
      c.nKvHeads,
      c.headDim,
      T,
      startPos,
      at.x,
      normOffset(w.attnNorm),
      normOffset(w.ffnNorm),
      0,
      0,
      0,
      0, // slots 12-15: the weights are at BLOCK_DESC_WEIGHTS_BYTE
      0,
      0, // slots 16-17: the KV layers are at BLOCK_DESC_KV_BYTE
      kv.dtype === 'f16' ? 1 : 0,
      at.rope,
      at.act,
      at.sync
    ]
  }

  return {
    run(x, T, startPos, ws, kvs, c) {
      const n = ws.length
      if (
        !native.fusedBlock ||
        n === 0 ||
        kvs.length !== n ||
        deps.batchedFrom !== NATIVE_BATCHED_FROM ||
        (native.batchedFrom ?? NATIVE_BATCHED_FROM) !== NATIVE_BATCHED_FROM
      )
        return false
      // Gemma 2/3 (soft-caps, windows, post-norms, GeGLU) run op by op: shards/family-block.ts.
      // A RoPE magnitude (YaRN, longrope) scales q and k after RoPE op by op (rope-config.ts
      // applyRopeMagnitude); folding it into cos/sin here would round differently.
      if (
        c.family ||
        c.moe ||
        c.ropeMagnitude !== undefined ||
        ws.some((w) => w.moe || w.wk) ||
        c.headDim % 2 !== 0 ||
        c.nKvHeads <= 0 ||
        c.nHeads % c.nKvHeads !== 0
      )
        return false
      const { dim, qDim, kvDim, hiddenDim } = c
      if (c.qDim !== c.nHeads * c.headDim || (c.qkNorm && c.headDim % 2 !== 0)) return false
      const rope = ropeTable(T, startPos, c)
      const xp = scratch.get('blk-x', T * dim * 4)
      const act = scratch.get('blk-act', T * (qDim + 2 * kvDim + qDim + hiddenDim) * 4)
      const sync = scratch.get('blk-sync', n * L.BLOCK_SYNC_BYTES)
      const desc = scratch.get('blk-desc', n * L.BLOCK_DESC_BYTES)
      const all: number[][] = []
      const types: number[][] = []
      const kvAt: number[][] = []
      for (let i = 0; i < n; i++) {
        const at: Record<string, number> & { types?: number[]; weights?: number[]; kv?: number[] } = {
          x: xp,
          rope,
          act,
          sync: sync + i * L.BLOCK_SYNC_BYTES
        }
        const slots = blockSlots(ws[i], kvs[i], c, T, startPos, at)
        if (!slots || !at.types || !at.weights || !at.kv) return false
        all.push(slots)
        types.push([...at.types, ...at.weights])
        kvAt.push(at.kv)
      }
      heap.f32().set(x.subarray(0, T * dim), xp >>> 2)
      heap.u8().fill(0, sync, sync + n * L.BLOCK_SYNC_BYTES)
      eps[0] = c.rmsEps
      for (let i = 0; i < n; i++) {
        const at = desc + i * L.BLOCK_DESC_BYTES
        heap.i32().set(all[i], at >>> 2)
        heap.u8().set(epsBytes, at + L.BLOCK_DESC_EPS_BYTE)
        const w = ws[i]
        heap
          .i32()
          .set(
            [c.qDim, w.bqkv ? normOffset(w.bqkv) : 0, w.qNorm ? normOffset(w.qNorm) : 0, w.kNorm ? normOffset(w.kNorm) : 0],
            (at + L.BLOCK_DESC_ARCH_BYTE) >>> 2
          )
        heap.i32().set(types[i], (at + L.BLOCK_DESC_TYPES_BYTE) >>> 2)
        heap.i32().set(kvAt[i], (at + L.BLOCK_DESC_KV_BYTE) >>> 2)
      }
      deps.setArgs([L.OP_DECODE_BLOCK, desc, n])
      pool.run('native')
      x.set(heap.f32().subarray(xp >>> 2, (xp >>> 2) + T * dim))
      return true
    }
  }
}
