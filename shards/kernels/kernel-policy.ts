import type { ModelConfig } from '../types.js'
import type { Kernels } from './kernels.js'
import { type SelectKernelsOptions, selectKernels } from './kernels-fast.js'
import { createReferenceKernels } from './kernels-ref.js'

/**
 * Below this hidden size a matrix-vector product takes microseconds, less than waking the
 * kernel threads, so `auto` runs such models (like the bundled stories260K, dim 64) on the
 * plain reference kernels instead.
 */
export const SMALL_MODEL_DIM = 256

/** selectKernels with the model in view: `auto` keeps tiny models on the reference kernels. */
export function selectKernelsFor(config: ModelConfig, options: SelectKernelsOptions = {}): Kernels {
  if ((options.kind ?? 'auto') === 'auto' && config.dim < SMALL_MODEL_DIM) return createReferenceKernels()
  return selectKernels(options)
}
