// The model engine: formats, tokenizer, kernels, spans of blocks, edge parts, sampler.

export { llama3RopeFactors, neoxToNormOrder, ropeFrequencies, SUPPORTED_ARCHITECTURES } from './architectures.js'
export { SUPPORTED_PRE_TOKENIZERS } from './bpe-pretokenize.js'
export { createEdge, Edge, type EdgeInit } from './edge.js'
export * from './errors.js'
export { f16ToF32, f32ToF16 } from './f16.js'
export {
  type BlockPipeline,
  createLocalPipeline,
  type GenerateInit,
  generateTokens,
  type LocalPipelineOptions
} from './generate.js'
export { openGgufModelFrom } from './gguf-model.js'
export { type GgufHeader, type GgufTensorInfo, readGgufHeader } from './gguf-reader.js'
export type { GgufTypedValue } from './gguf-values.js'
export { type GgufInit, writeGguf } from './gguf-writer.js'
export {
  type CpuInfo,
  chooseKernels,
  cpuInfo,
  type KernelChoice,
  kernelChoiceFile,
  kernelChoiceOf,
  kernelChoiceSummary
} from './kernel-calibration.js'
export { SMALL_MODEL_DIM, selectKernelsFor } from './kernel-policy.js'
export { type SpanKernelReport, spanKernelReport, spanSlowReasons } from './kernel-report.js'
export type { AttentionShape, KernelPlacement, Kernels, KvLayer, PrepareOptions } from './kernels.js'
export {
  createFastKernels,
  type FastKernelOptions,
  type FastKernels,
  type KernelKind,
  type SelectKernelsOptions,
  selectKernels
} from './kernels-fast.js'
export { createReferenceKernels } from './kernels-ref.js'

export { DEFAULT_KV_DTYPE, KV_DTYPES, type KvAllocator, KvCache, type KvDType, kvAllocatorOf, kvRowBytes } from './kv-cache.js'
export { type ByteSource, type GgufValue, type ModelFile, sampleRange } from './model-file.js'
export { computeModelId, SAMPLE_BYTES as MODEL_ID_SAMPLE_BYTES } from './model-id.js'
export { type OpenModelOptions, openModelFile } from './open-model.js'
export { NATIVE_BATCHED_FROM } from './options.js'
export { dequantizeRow, Q8_0_BLOCK, Q8_0_BLOCK_BYTES, quantizeMatrix, rowBytes } from './quant.js'
export { type ArchSpec, archConfig } from './random-arch.js'
export {
  createRandomModel,
  MODEL_SHAPES,
  type ModelShape,
  parseShape,
  type RandomModelOptions,
  randomModelConfig,
  syntheticVocabulary,
  writeRandomModel
} from './random-model.js'
export { createSampler, logSoftmax, type Sampler, type SamplerOptions, Xorshift64 } from './sampler.js'
export { type BatchStep, createShard, type SessionOptions, Shard, type ShardInit } from './shard.js'
export type { ShardLike } from './shard-types.js'
export * from './tokenizer.js'
export * from './tokenizer-files.js'
export * from './tokenizer-special.js'
export type * from './types.js'
export { BLOCK_TENSORS } from './types.js'
export { loadPackageVocabulary, VOCAB_PACKAGES, type VocabPackageName } from './vocab-packages.js'
