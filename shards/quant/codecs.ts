/**
 * Weight codecs. The reference block codecs of every GGUF type live in shards/quant/ (one
 * file per family); this module keeps the names the rest of the engine imports.
 */
export { dequantizeBlocks, dequantizeRow, quantizeMatrix, quantizeRow, rowBytes } from './index.js'

/** GGUF Q8_0: 32 weights per block, one f16 scale then 32 int8 (34 bytes). */
export const Q8_0_BLOCK = 32
export const Q8_0_BLOCK_BYTES = 34

/** C's roundf: halves go away from zero (Math.round sends -2.5 to -2). */
export function roundHalfAway(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x)
}
