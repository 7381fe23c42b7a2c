/** Defaults of the engine that more than one file needs, in one place. */

/**
 * Rows per step from which matmuls go to the native addon's batched kernels (below it, decode
 * kernels). The native code has the same threshold compiled in (shards/native/block.cc and
 * quant-dot.cc `kBatchedFrom`); the fused native block is used only while the two agree.
 */
export const NATIVE_BATCHED_FROM = 8
