/** Defaults of the engine that more than one file needs, in one place. */

/**
 * Rows per step from which matmuls go to the native addon's batched kernels (below it, decode
 * kernels). shards/native/build.mjs reads this line and compiles it in (batch.h
 * `kBatchedFrom`); the addon exports it as `batchedFrom`, and the fused native block is used
 * only while the two agree (an addon built before a change here).
 */
export const NATIVE_BATCHED_FROM = 8
