import type { Kernels } from './kernels/kernels.js'
import type { KvDType } from './kv-cache.js'
import type { ModelFile } from './model/model-file.js'

/** How a Shard is made (shards/shard.ts). */
export interface ShardInit {
  readonly model: ModelFile
  /** First block, inclusive. */
  readonly start: number
  /** Last block, exclusive. */
  readonly end: number
  /** Kernel set; the plain TypeScript reference when omitted. */
  readonly kernels?: Kernels
  /** KV cache storage, f32 by default. */
  readonly kvDType?: KvDType
  /** Called after each block's weights are read: (blocks loaded, blocks in span). */
  readonly onProgress?: (loaded: number, total: number) => void
  /**
   * Longest run of rows pushed through the blocks at once (default 64): a longer step (a long
   * prompt) goes through in pieces of this many rows, with the same bits, so activation
   * buffers stay bounded by it instead of growing with the prompt.
   */
  readonly maxStepRows?: number
}

/** One session's step in Shard.forwardBatch. */
export interface BatchStep {
  readonly id: string
  /** [T, dim] hidden states at positions startPos .. startPos+T-1. */
  readonly hidden: Float32Array
  readonly startPos: number
}

export interface SessionOptions {
  /** KV positions to preallocate; defaults to the model's context length. */
  readonly maxLength?: number
  /** The sub-span [start, end) of the shard's blocks this session runs; the whole shard by default. */
  readonly start?: number
  readonly end?: number
}
