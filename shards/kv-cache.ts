import { InvalidArgumentError, OutOfCacheError, PositionError } from './errors.js'
import { f32ToF16 } from './f16.js'
import type { KvLayer } from './kernels/kernels.js'
import { quantizeRow } from './quant/codecs.js'

/**
 * KV cache storage: f32, f16 (half the memory) or q8_0 (GGUF Q8_0 blocks per row, 34 bytes
 * per 32 values: 0.27 of f32; needs kvDim to be a multiple of 32).
 */
export type KvDType = 'f32' | 'f16' | 'q8_0'
export const KV_DTYPES: readonly KvDType[] = ['f32', 'f16', 'q8_0']
/** What nodes and clients store unless told otherwise (`--kv-dtype`): half of f32's memory. */
export const DEFAULT_KV_DTYPE: KvDType = 'f16'

/** Bytes of one row of kvDim values in a KV dtype. */
export function kvRowBytes(dtype: KvDType, kvDim: number): number {
  if (dtype === 'f32') return kvDim * 4
  if (dtype === 'f16') return kvDim * 2
  if (kvDim % 32 !== 0) throw new InvalidArgumentError(`a q8_0 KV cache needs kvDim to be a multiple of 32, got ${kvDim}`)
  return (kvDim / 32) * 34
}

/** Where KV layers live: a kernel set that keeps them in its own memory (FastKernels.allocKv). */
export interface KvAllocator {
  allocKv(maxLength: number, kvDim: number, dtype: KvDType): KvLayer
  freeKv(kv: KvLayer): void
}

/** The kernel set's KV allocator when it has one (attention then reads the cache in place). */
export function kvAllocatorOf(kernels: object): KvAllocator | undefined {
  const k = kernels as Partial<KvAllocator>
  return typeof k.allocKv === 'function' && typeof k.freeKv === 'function' ? (k as KvAllocator) : undefined
}

/** Positions a session's KV cache holds at open (fewer when its maxLength is smaller). */
export const KV_INITIAL_POSITIONS = 64

/** Positions a cache holding `capacity` holds once it fits `needed` (doubling, at most maxLength). */
export function grownKvCapacity(capacity: number, needed: number, maxLength: number): number {
  let c = Math.max(1, capacity)
  while (c < needed) c *= 2
  return Math.min(maxLength, c)
}

/**
 * A session's KV cache for the blocks of one span. It holds KV_INITIAL_POSITIONS positions at
 * open and grows (doubling, copying what it holds) as positions are filled, up to `maxLength`
 * (issue #39: KV reserved only as it is filled, so a session that asks for a long context and
 * does not use it holds little; the node counts what is held, node/daemon/session-manager.ts).
 * Going past maxLength is an OutOfCacheError.
 */
export class KvCache {
  layers: KvLayer[]
  readonly maxLength: number
  readonly kvDim: number
  readonly dtype: KvDType
  /** Positions 0 .. length-1 hold valid keys and values. */
  length = 0
  /** Positions the layers hold now (grows up to maxLength as positions are filled). */
  capacity: number

  private readonly allocator: KvAllocator | undefined
  private freed = false
  /** Bytes of one row (kvDim values) of keys or values. */
  private readonly rowBytes: number
  private readonly nLayers: number

  /**
   * With an allocator the layers live in the kernels' memory (FastKernels.allocKv) and must be
   * released with free(); without one they are ordinary typed arrays. A q8_0 cache never takes
   * the allocator: the fast kernels read f32/f16 caches in place, a q8_0 one runs attention on
   * the reference kernels (kernels-ref.ts decodes its blocks).
   */
  constructor(nLayers: number, kvDim: number, maxLength: number, dtype: KvDType = 'f32', allocator?: KvAllocator) {
    if (!Number.isInteger(maxLength) || maxLength < 1)
      throw new InvalidArgumentError(`maxLength must be a positive integer, got ${maxLength}`)
    if (!KV_DTYPES.includes(dtype)) throw new InvalidArgumentError(`KV cache dtype must be f32, f16 or q8_0, got ${dtype}`)
    this.rowBytes = kvRowBytes(dtype, kvDim)
    this.maxLength = maxLength
    this.kvDim = kvDim
    this.dtype = dtype
    this.nLayers = nLayers
    this.allocator = dtype === 'q8_0' ? undefined : allocator
    this.capacity = Math.min(maxLength, KV_INITIAL_POSITIONS)
    this.layers = this.alloc(this.capacity)
  }

  /** Layers of `capacity` positions (freed again if an allocation fails part way). */
  private alloc(capacity: number): KvLayer[] {
    const { dtype, kvDim, allocator } = this
    if (dtype === 'q8_0') {
      const bytes = (): Uint8Array => new Uint8Array(capacity * this.rowBytes)
      return Array.from({ length: this.nLayers }, () => ({ dtype, keys: bytes(), values: bytes() }))
    }
    if (allocator) {
      const layers: KvLayer[] = []
      try {
        for (let l = 0; l < this.nLayers; l++) layers.push(allocator.allocKv(capacity, kvDim, dtype))
      } catch (e) {
        for (const kv of layers) allocator.freeKv(kv)
        throw e
      }
      return layers
    }
    const make = (): Float32Array | Uint16Array =>
      dtype === 'f32' ? new Float32Array(capacity * kvDim) : new Uint16Array(capacity * kvDim)
    return Array.from({ length: this.nLayers }, () => ({ dtype: dtype as 'f32' | 'f16', keys: make(), values: make() }))
  }

  /** Hold at least `needed` positions: new layers, what is held copied over, the old ones freed. */
  private grow(needed: number): void {
    const capacity = grownKvCapacity(this.capacity, needed, this.maxLength)
    if (capacity <= this.capacity) return
    const layers = this.alloc(capacity)
    const held = this.capacity
    this.layers.forEach((kv, l) => {
      rowsView(layers[l].keys, 0, held, this.rowBytes).set(rowsView(kv.keys, 0, held, this.rowBytes))
      rowsView(layers[l].values, 0, held, this.rowBytes).set(rowsView(kv.values, 0, held, this.rowBytes))
      this.allocator?.freeKv(kv)
    })
    this.layers = layers
    this.capacity = capacity
  }

  /** Give the layers back to the allocator (idempotent); the cache is unusable afterwards. */
  free(): void {
    if (this.freed) return
    this.freed = true
    this.length = 0
    if (this.allocator) for (const kv of this.layers) this.allocator.freeKv(kv)
  }

  /** Bytes this cache holds. */
  get sizeBytes(): number {
    return this.layers.length * 2 * this.capacity * this.rowBytes
  }

  /** Throw OutOfCacheError unless rows startPos .. startPos+T-1 fit. */
  reserve(startPos: number, T: number): void {
    if (this.freed) throw new InvalidArgumentError('the KV cache was freed (session closed)')
    if (startPos + T > this.maxLength) {
      throw new OutOfCacheError(
        `positions ${startPos}..${startPos + T - 1} do not fit the KV cache of ${this.maxLength} positions`
      )
    }
    if (startPos + T > this.capacity) this.grow(startPos + T)
  }

  /** Store k, v [T, kvDim] of one layer at rows startPos .. startPos+T-1. */
  write(layer: number, startPos: number, T: number, k: Float32Array, v: Float32Array): void {
    const kv = this.layers[layer]
    const n = T * this.kvDim
    const at = startPos * this.kvDim
    if (kv.dtype === 'f32') {
      ;(kv.keys as Float32Array).set(k.subarray(0, n), at)
      ;(kv.values as Float32Array).set(v.subarray(0, n), at)
    } else if (kv.dtype === 'q8_0') {
      // ggml's quantize_row_q8_0 rounding, row by row (llama.cpp's q8_0 cache stores the same).
      for (let t = 0; t < T; t++) {
        const dst = (startPos + t) * this.rowBytes
        quantizeRow('q8_0', k, t * this.kvDim, this.kvDim, kv.keys as Uint8Array, dst)
        quantizeRow('q8_0', v, t * this.kvDim, this.kvDim, kv.values as Uint8Array, dst)
      }
    } else {
      for (let i = 0; i < n; i++) {
        kv.keys[at + i] = f32ToF16(k[i])
        kv.values[at + i] = f32ToF16(v[i])
      }
    }
  }

  /** Bytes of one position across all layers, keys and values (the export layout's row unit). */
  get bytesPerPosition(): number {
    return this.layers.length * 2 * this.rowBytes
  }

  /**
   * Copy positions [from, to) out in the export layout: for each layer in order, its keys rows
   * [from, to) then its values rows [from, to), each row kvDim values of the cache dtype in the
   * platform's (little-endian) byte order. Into `out` (a view of it is returned) when given.
   */
  exportRows(from: number, to: number, out?: Uint8Array): Uint8Array {
    if (this.freed) throw new InvalidArgumentError('the KV cache was freed (session closed)')
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || from > to || to > this.length) {
      throw new PositionError(`cannot export positions [${from}, ${to}) of a KV cache of length ${this.length}`)
    }
    const total = (to - from) * this.bytesPerPosition
    if (out !== undefined && (!(out instanceof Uint8Array) || out.length < total)) {
      throw new InvalidArgumentError(`export buffer must be a Uint8Array of at least ${total} bytes`)
    }
    const dst = out === undefined ? new Uint8Array(total) : out.subarray(0, total)
    let o = 0
    for (const kv of this.layers) {
      for (const a of [kv.keys, kv.values]) {
        const bytes = rowsView(a, from, to, this.rowBytes)
        dst.set(bytes, o)
        o += bytes.length
      }
    }
    return dst
  }

  /**
   * Write `data` (exportRows layout, this cache's dtype) at positions from, from+1, ... and set
   * the length to from + rows. A `from` past the current length would leave a gap: PositionError.
   */
  importRows(from: number, data: Uint8Array): number {
    if (this.freed) throw new InvalidArgumentError('the KV cache was freed (session closed)')
    if (!(data instanceof Uint8Array)) throw new InvalidArgumentError('KV data must be a Uint8Array')
    if (!Number.isInteger(from) || from < 0 || from > this.length) {
      throw new PositionError(`cannot import KV at position ${from} into a cache of length ${this.length} (gap)`)
    }
    const per = this.bytesPerPosition
    if (data.length % per !== 0) {
      throw new InvalidArgumentError(
        `KV data of ${data.length} bytes is not a whole number of ${per}-byte positions (${this.dtype})`
      )
    }
    const rows = data.length / per
    this.reserve(from, rows)
    const block = rows * this.rowBytes
    let o = 0
    for (const kv of this.layers) {
      for (const a of [kv.keys, kv.values]) {
        rowsView(a, from, from + rows, this.rowBytes).set(data.subarray(o, o + block))
        o += block
      }
    }
    this.length = from + rows
    return rows
  }
}

/** The bytes of rows [from, to) of one layer's keys or values (a view, no copy). */
function rowsView(a: Float32Array | Uint16Array | Uint8Array, from: number, to: number, rowBytes: number): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset + from * rowBytes, (to - from) * rowBytes)
}
