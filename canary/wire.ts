import { dequantizeRow, quantizeMatrix } from '../shards/index.js'
import { CanaryArgumentError } from './errors.js'

/** Activation dtypes of the wire (protocol §3): f32, f16, and blockwise int8 as GGUF Q8_0. */
export type WireDType = 'f32' | 'f16' | 'int8'
export const WIRE_DTYPES: readonly WireDType[] = ['f32', 'f16', 'int8']

/**
 * What hidden states [rows, dim] look like after a trip over the wire in `dtype`: f16 rounds
 * to nearest even; int8 is Q8_0 (32 values + one f16 scale per block, ggml's rounding), so it
 * needs dim to be a multiple of 32. f32 returns a copy.
 */
export function wireRoundtrip(values: Float32Array, dim: number, dtype: WireDType): Float32Array {
  if (!(values instanceof Float32Array)) throw new CanaryArgumentError('wireRoundtrip needs a Float32Array')
  if (!Number.isInteger(dim) || dim < 1 || values.length % dim !== 0) {
    throw new CanaryArgumentError(`${values.length} values are not whole rows of ${dim}`)
  }
  if (!WIRE_DTYPES.includes(dtype)) throw new CanaryArgumentError(`wire dtype must be f32, f16 or int8, got ${dtype}`)
  if (dtype === 'f32') return Float32Array.from(values)
  const rows = values.length / dim
  const m = quantizeMatrix(values, rows, dim, dtype === 'f16' ? 'f16' : 'q8_0')
  const out = new Float32Array(values.length)
  for (let r = 0; r < rows; r++) dequantizeRow(m, r, out.subarray(r * dim, (r + 1) * dim))
  return out
}
