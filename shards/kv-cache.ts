import { InvalidArgumentError, OutOfCacheError } from './errors.js'
import { f32ToF16 } from './f16.js'
import type { KvLayer } from './kernels.js'

export type KvDType = 'f32' | 'f16'

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

  constructor(nLayers: number, kvDim: number, maxLength: number, dtype: KvDType = 'f32') {
    if (!Number.isInteger(maxLength) || maxLength < 1) throw new InvalidArgumentError(`maxLength must be a positive integer, got ${maxLength}`)
    if (dtype !== 'f32' && dtype !== 'f16') throw new InvalidArgumentError(`KV cache dtype must be f32 or f16, got ${dtype}`)
    this.maxLength = maxLength
    this.kvDim = kvDim
    this.dtype = dtype
    const alloc = (): Float32Array | Uint16Array =>
      dtype === 'f32' ? new Float32Array(maxLength * kvDim) : new Uint16Array(maxLength * kvDim)
    this.layers = Array.from({ length: nLayers }, () => ({ dtype, keys: alloc(), values: alloc() }))
  }

  /** Bytes this cache holds. */
  get sizeBytes(): number {
    return this.layers.length * 2 * this.maxLength * this.kvDim * (this.dtype === 'f32' ? 4 : 2)
  }

  /** Throw OutOfCacheError unless rows startPos .. startPos+T-1 fit. */
  reserve(startPos: number, T: number): void {
    if (startPos + T > this.maxLength) {
      throw new OutOfCacheError(`positions ${startPos}..${startPos + T - 1} do not fit the KV cache of ${this.maxLength} positions`)
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
}
