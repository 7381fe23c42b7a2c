import { InvalidArgumentError, OutOfCacheError, PositionError } from './errors.js'
import { f32ToF16 } from './f16.js'
import type { KvLayer } from './kernels.js'

export type KvDType = 'f32' | 'f16'

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

/**
 * A session's KV cache for the blocks of one span, preallocated to `maxLength` positions so a
 * session never grows memory while it runs; going past it is an OutOfCacheError.
 */
export class KvCache {
  readonly layers: KvLayer[]
  readonly maxLength: number
  readonly kvDim: number
  readonly dtype: KvDType
  /** Positions 0 .. length-1 hold valid keys and values. */
  length = 0

  private readonly allocator: KvAllocator | undefined
  private freed = false

  /**
   * With an allocator the layers live in the kernels' memory (FastKernels.allocKv) and must be
   * released with free(); without one they are ordinary typed arrays.
   */
  constructor(nLayers: number, kvDim: number, maxLength: number, dtype: KvDType = 'f32', allocator?: KvAllocator) {
    if (!Number.isInteger(maxLength) || maxLength < 1)
      throw new InvalidArgumentError(`maxLength must be a positive integer, got ${maxLength}`)
    if (dtype !== 'f32' && dtype !== 'f16') throw new InvalidArgumentError(`KV cache dtype must be f32 or f16, got ${dtype}`)
    this.maxLength = maxLength
    this.kvDim = kvDim
    this.dtype = dtype
    this.allocator = allocator
    if (allocator) {
      this.layers = []
      try {
        for (let l = 0; l < nLayers; l++) this.layers.push(allocator.allocKv(maxLength, kvDim, dtype))
      } catch (e) {
        this.free()
        throw e
      }
      return
    }
    const alloc = (): Float32Array | Uint16Array =>
      dtype === 'f32' ? new Float32Array(maxLength * kvDim) : new Uint16Array(maxLength * kvDim)
    this.layers = Array.from({ length: nLayers }, () => ({ dtype, keys: alloc(), values: alloc() }))
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
    return this.layers.length * 2 * this.maxLength * this.kvDim * (this.dtype === 'f32' ? 4 : 2)
  }

  /** Throw OutOfCacheError unless rows startPos .. startPos+T-1 fit. */
  reserve(startPos: number, T: number): void {
    if (this.freed) throw new InvalidArgumentError('the KV cache was freed (session closed)')
    if (startPos + T > this.maxLength) {
      throw new OutOfCacheError(
        `positions ${startPos}..${startPos + T - 1} do not fit the KV cache of ${this.maxLength} positions`
      )
    }
  }

  /** Store k, v [T, kvDim] of one layer at rows startPos .. startPos+T-1. */
  write(layer: number, startPos: number, T: number, k: Float32Array, v: Float32Array): void {
    const kv = this.layers[layer]
    const n = T * this.kvDim
    const at = startPos * this.kvDim
    if (kv.dtype === 'f32') {
      ;(kv.keys as Float32Array).set(k.subarray(0, n), at)
      ;(kv.values as Float32Array).set(v.subarray(0, n), at)
    } else {
      for (let i = 0; i < n; i++) {
        kv.keys[at + i] = f32ToF16(k[i])
        kv.values[at + i] = f32ToF16(v[i])
      }
    }
  }

  /** Bytes of one position across all layers, keys and values (the export layout's row unit). */
  get bytesPerPosition(): number {
    return this.layers.length * 2 * this.kvDim * (this.dtype === 'f32' ? 4 : 2)
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
        const bytes = rowBytes(a, from, to, this.kvDim)
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
    const block = rows * this.kvDim * (this.dtype === 'f32' ? 4 : 2)
    let o = 0
    for (const kv of this.layers) {
      for (const a of [kv.keys, kv.values]) {
        rowBytes(a, from, from + rows, this.kvDim).set(data.subarray(o, o + block))
        o += block
      }
    }
    this.length = from + rows
    return rows
  }
}

/** The bytes of rows [from, to) of one layer's keys or values (a view, no copy). */
function rowBytes(a: Float32Array | Uint16Array, from: number, to: number, kvDim: number): Uint8Array {
  const bpe = a.BYTES_PER_ELEMENT
  return new Uint8Array(a.buffer, a.byteOffset + from * kvDim * bpe, (to - from) * kvDim * bpe)
}
