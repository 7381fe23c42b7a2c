import { InvalidArgumentError, KernelMemoryError, RepackRefusedError } from '../../errors.js'
import type { NativeAddon } from '../../native/load.js'
import { rowBytes } from '../../quant/codecs.js'
import { isQuantDType, QUANT_LAYOUTS } from '../../quant/quant-blocks.js'
import type { WeightMatrix } from '../../types.js'
import type { KernelPlacement, PrepareOptions } from '../kernels.js'
import type { WasmHeap } from './heap.js'

/**
 * Where the fast kernels keep weight matrices: copied once into the WebAssembly heap (up to
 * `heapWeightBytes`), past that into native buffers the addon's kernels address directly, and
 * without the addon in ordinary memory left to the TypeScript kernels. Every byte that runs
 * slowly is counted with its cause (placement()), so a node can say so rather than serve
 * slowly in silence.
 */
export interface WeightStore {
  prepare(w: WeightMatrix): WeightMatrix
  prepareInto(shape: Omit<WeightMatrix, 'data'>, fill: (data: Uint8Array) => void, options?: PrepareOptions): WeightMatrix
  /** Bits to OR into a matrix's native type code: ROWS8 when prepareInto repacked it. */
  layoutFlag(w: WeightMatrix): number
  /** Heap offset of a weight matrix (placing it on first use); null when it is not in the heap. */
  heapOffset(w: WeightMatrix): number | null
  /** Distance from the heap's start of a weight in a native buffer, undefined otherwise. */
  externalDelta(w: WeightMatrix): number | undefined
  /** Address of a weight matrix as a distance from the heap's start (heap or native buffer). */
  weightDelta(w: WeightMatrix): number | null
  placement(): KernelPlacement
}

export interface WeightStoreOptions {
  readonly heap: WasmHeap
  readonly native: NativeAddon | null
  /** Bytes of weights the heap takes at most; past it, native buffers when the addon makes them. */
  readonly heapWeightBytes: number
}

/** shards/native/quant-layout.h kRows8: the matrix is in the addon's rows8 layout. */
export const ROWS8 = 0x100
/** The types the addon repacks (quant-layout.cc rows8Supported). */
const ROWS8_TYPES: ReadonlySet<string> = new Set(['q4_k', 'q5_k', 'q6_k'])

const HEAP_FULL = 'weights past the 4 GiB WebAssembly heap run on the TypeScript reference kernels (no native addon takes them)'
const outsideNoKernel = (dtype: string): string =>
  `${dtype} weights in native buffers run on their TypeScript definition (the native addon has no block-type kernels)`

export function createWeightStore(options: WeightStoreOptions): WeightStore {
  const { heap, native, heapWeightBytes } = options
  const weights = new WeakMap<WeightMatrix, number | null>()
  const external = new WeakMap<WeightMatrix, number>()
  const reclaim = new FinalizationRegistry<number>((offset) => heap.free(offset))
  const held = new WeakMap<WeightMatrix, Uint8Array>()
  const rows8 = new WeakSet<WeightMatrix>()
  const repack = native?.quantTypes ? native.repackRows8 : undefined
  let weightBytes = 0
  let externalBytes = 0
  let heapWeights = 0
  const slow = new Map<string, number>()
  const noteSlow = (reason: string, bytes: number): void => void slow.set(reason, (slow.get(reason) ?? 0) + bytes)
  const canSpill = native !== null && typeof native.allocBuffer === 'function' && typeof native.addressOf === 'function'
  const heapAddress = canSpill ? (native.addressOf as (v: Uint8Array) => number)(new Uint8Array(heap.memory.buffer, 0, 1)) : 0
  const bytesOf = (w: Omit<WeightMatrix, 'data'>): number => rowBytes(w.dtype, w.cols) * w.rows

  /** A native buffer for `bytes` of weights past the heap, or null without the addon. */
  function spill(bytes: number): { view: Uint8Array; delta: number } | null {
    if (!canSpill) return null
    const view = new Uint8Array((native.allocBuffer as (n: number) => ArrayBuffer)(bytes))
    externalBytes += bytes
    return { view, delta: (native.addressOf as (v: Uint8Array) => number)(view) - heapAddress }
  }

  /** Count a placed matrix; the heap's WebAssembly kernels take every dtype. */
  function account(w: Omit<WeightMatrix, 'data'>, where: 'heap' | 'native' | 'none'): void {
    const bytes = bytesOf(w)
    weightBytes += bytes
    if (where === 'none') noteSlow(HEAP_FULL, bytes)
    else if (where === 'native' && isQuantDType(w.dtype) && !native?.quantTypes) noteSlow(outsideNoKernel(w.dtype), bytes)
  }

  /** A heap allocation within the weights' share, or null. */
  function tryAlloc(bytes: number): number | null {
    if (heapWeights + bytes > heapWeightBytes && canSpill) return null
    try {
      return heap.alloc(bytes)
    } catch (e) {
      if (e instanceof KernelMemoryError) return null
      throw e
    }
  }

  /** The heap copy; its bytes are freed when `owner` (default: the copy) is collected. */
  function inHeap(shape: Omit<WeightMatrix, 'data'>, offset: number, bytes: number, owner?: WeightMatrix): WeightMatrix {
    heapWeights += bytes
    const data = new Uint8Array(heap.memory.buffer, offset, bytes)
    const prepared: WeightMatrix = { dtype: shape.dtype, rows: shape.rows, cols: shape.cols, data }
    weights.set(owner ?? prepared, offset)
    reclaim.register(owner ?? prepared, offset)
    return prepared
  }

  function outside(shape: Omit<WeightMatrix, 'data'>, view: Uint8Array, delta: number, owner?: WeightMatrix): WeightMatrix {
    const prepared: WeightMatrix = { dtype: shape.dtype, rows: shape.rows, cols: shape.cols, data: view }
    // The native buffer lives as long as its view: the owner keeps the copy alive.
    external.set(owner ?? prepared, delta)
    if (owner) held.set(owner, view)
    return prepared
  }

  /**
   * Copy w into the heap, else into a native buffer; w itself (unplaced) when neither takes it.
   * With `owner`, the copy is filed under it (a matrix used without prepare()).
   */
  function place(w: WeightMatrix, owner?: WeightMatrix): WeightMatrix {
    const bytes = bytesOf(w)
    if (w.data.byteLength < bytes) throw new InvalidArgumentError(`weight data has ${w.data.byteLength} bytes, needs ${bytes}`)
    const offset = tryAlloc(bytes)
    if (offset !== null) {
      account(w, 'heap')
      const prepared = inHeap(w, offset, bytes, owner)
      prepared.data.set(w.data.subarray(0, bytes))
      return prepared
    }
    const spilled = spill(bytes)
    if (spilled) {
      account(w, 'native')
      spilled.view.set(w.data.subarray(0, bytes))
      return outside(w, spilled.view, spilled.delta, owner)
    }
    account(w, 'none')
    weights.set(w, null)
    return w
  }

  const store: WeightStore = {
    prepare(w) {
      if (weights.has(w) || external.has(w)) return w
      return place(w)
    },

    prepareInto(shape, fill, options) {
      // Filled bytes go to the addon's rows8 layout where it has one (every quant matmul on
      // these weights then runs there), unless the caller reads rows of the copy itself.
      const canRepack = repack !== undefined && !options?.keepRows && ROWS8_TYPES.has(shape.dtype) && shape.rows >= 8
      const ggml = canRepack ? QUANT_LAYOUTS[shape.dtype as keyof typeof QUANT_LAYOUTS].ggmlType : 0
      const filled = (data: Uint8Array): void => {
        fill(data)
        if (canRepack && !repack(data, ggml, shape.rows, shape.cols))
          throw new RepackRefusedError(`repackRows8 refused a ${shape.dtype} matrix`)
      }
      const mark = (w: WeightMatrix): WeightMatrix => {
        if (canRepack) rows8.add(w)
        return w
      }
      const bytes = bytesOf(shape)
      const offset = tryAlloc(bytes)
      if (offset !== null) {
        try {
          filled(new Uint8Array(heap.memory.buffer, offset, bytes))
        } catch (e) {
          heap.free(offset)
          throw e
        }
        account(shape, 'heap')
        return mark(inHeap(shape, offset, bytes))
      }
      // Past the heap's share of weights (or its 4 GiB): a native buffer the native kernels
      // address directly; without the addon an ordinary buffer for the reference kernels.
      const spilled = spill(bytes)
      if (spilled) {
        filled(spilled.view)
        account(shape, 'native')
        return mark(outside(shape, spilled.view, spilled.delta))
      }
      const data = new Uint8Array(bytes)
      fill(data)
      account(shape, 'none')
      const w: WeightMatrix = { ...shape, data }
      weights.set(w, null)
      return w
    },

    heapOffset(w) {
      const known = weights.get(w)
      if (known !== undefined) return known
      if (external.has(w)) return null
      // A matrix that did not come through prepare(): placed on first use, filed under itself.
      place(w, w)
      return weights.get(w) ?? null
    },

    externalDelta: (w) => external.get(w),

    layoutFlag: (w) => (rows8.has(w) ? ROWS8 : 0),

    weightDelta(w) {
      const offset = store.heapOffset(w)
      return offset ?? external.get(w) ?? null
    },

    placement: () => ({
      weightBytes,
      nativeBufferBytes: externalBytes,
      slowWeightBytes: [...slow.values()].reduce((a, b) => a + b, 0),
      reasons: [...slow.keys()]
    })
  }
  return store
}
