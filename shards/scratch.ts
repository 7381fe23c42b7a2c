import { ropeFrequencies } from './model/architectures.js'
import type { ModelConfig } from './types.js'

/** Activation buffers for a batch of up to `capacity` tokens, reused across steps. */
export class Scratch {
  capacity = 0
  xb = new Float32Array(0) // [T, dim]
  q = new Float32Array(0) // [T, qDim]
  k = new Float32Array(0) // [T, kvDim]
  v = new Float32Array(0) // [T, kvDim]
  att = new Float32Array(0) // [T, qDim]
  hb = new Float32Array(0) // [T, hidden]
  hb2 = new Float32Array(0) // [T, hidden]
  qkv = new Float32Array(0) // [T, qDim + 2 kvDim]
  qk = new Float32Array(0) // [T, qDim + kvDim] (a separate Wv, BlockMatrices.wv)
  h13 = new Float32Array(0) // [T, 2 hidden]
  /** RoPE angle per position of each pair (architectures.ts ropeFrequencies). */
  readonly ropeFreqs: Float64Array

  constructor(private readonly config: ModelConfig) {
    this.ropeFreqs = ropeFrequencies(config)
  }

  ensure(T: number): void {
    if (T <= this.capacity) return
    const { dim, qDim, kvDim, hiddenDim } = this.config
    this.capacity = T
    this.xb = new Float32Array(T * dim)
    this.q = new Float32Array(T * qDim)
    this.k = new Float32Array(T * kvDim)
    this.v = new Float32Array(T * kvDim)
    this.att = new Float32Array(T * qDim)
    this.hb = new Float32Array(T * hiddenDim)
    this.hb2 = new Float32Array(T * hiddenDim)
    this.qkv = new Float32Array(T * (qDim + 2 * kvDim))
    this.qk = new Float32Array(T * (qDim + kvDim))
    this.h13 = new Float32Array(T * 2 * hiddenDim)
  }
}
