// The model engine: formats, tokenizer, kernels, spans of blocks, edge parts, sampler.

export * from './constrain/index.js'
export { createEdge, Edge, type EdgeInit } from './edge.js'
export * from './errors.js'
export { f16ToF32, f32ToF16 } from './f16.js'
export * from './formats/index.js'
export {
  type BlockPipeline,
  createLocalPipeline,
  type GenerateInit,
  generateTokens,
  type LocalPipelineOptions
} from './generate.js'
export * from './head/index.js'
export * from './kernels/index.js'
export {
  DEFAULT_KV_DTYPE,
  grownKvCapacity,
  KV_DTYPES,
  KV_INITIAL_POSITIONS,
  type KvAllocator,
  KvCache,
  type KvDType,
  kvAllocatorOf,
  kvRowBytes
} from './kv-cache.js'
export * from './model/index.js'
export { NATIVE_BATCHED_FROM } from './options.js'
export { dequantizeRow, Q8_0_BLOCK, Q8_0_BLOCK_BYTES, quantizeMatrix, rowBytes } from './quant/codecs.js'
export { MODEL_FILE_TYPES, type ModelFileType } from './quant/file-types.js'
export { createSampler, logSoftmax, type Sampler, type SamplerOptions, Xorshift64 } from './sampler.js'
export type { ShardLike } from './shard.js'
export { type BatchStep, createShard, type SessionOptions, Shard, type ShardInit } from './shard.js'
export * from './tokenizers/index.js'
export type * from './types.js'
export { BLOCK_TENSORS } from './types.js'
