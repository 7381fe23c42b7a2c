import { dequantizeRow, quantizeMatrix } from '../shards/index.js'
import { CanaryArgumentError } from './errors.js'

/**
 * Activation dtypes of the wire (protocol/layerswarm.proto `DType`, named as protocol/ names
 * them): f32, f16, and q8_0 (GGUF Q8_0 blocks). canary/ may not import protocol/, so the names
 * are repeated here; test/canary/wire-roundtrip.test.ts checks they match.
 */
export type WireDType = 'f32' | 'f16' | 'q8_0'
export const WIRE_DTYPES: readonly WireDType[] = ['f32', 'f16', 'q8_0']

/**
 * What hidden states [rows, dim] look like after a trip over the wire in `dtype`: f16 rounds
 * to nearest even; q8_0 is GGUF Q8_0 (32 values + one f16 scale per block, ggml's rounding), so it
 * needs dim to be a multiple of 32. f32 returns a copy.
 */
export function wireRoundtrip(values: Float32Array, dim: number, dtype: WireDType): Float32Array {
  if (!(values instanceof Float32Array)) throw new CanaryArgumentError('wireRoundtrip needs a Float32Array')
  if (!Number.isInteger(dim) || dim < 1 || values.length % dim !== 0) {
    throw new CanaryArgumentError(`${values.length} values are not whole rows of ${dim}`)
  }
  if (!WIRE_DTYPES.includes(dtype)) throw new CanaryArgumentError(`wire dtype must be f32, f16 or q8_0, got ${dtype}`)
  if (dtype === 'f32') return Float32Array.from(values)
  const rows = values.length / dim
  const m = quantizeMatrix(values, rows, dim, dtype)
  const out = new Float32Array(values.length)
  for (let r = 0; r < rows; r++) dequantizeRow(m, r, out.subarray(r * dim, (r + 1) * dim))
  return out
}
