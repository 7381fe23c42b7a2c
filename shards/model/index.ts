// The model a shard runs: its file (GGUF, llama2.c) opened and guarded, its id and readable name,
// and the architectures with their configs (families, RoPE).

export { llama3RopeFactors, neoxToNormOrder, ropeFrequencies, SUPPORTED_ARCHITECTURES } from './architectures.js'
export { type GuardedReads, guardedModel } from './guarded-model.js'
export { type ByteSource, type GgufValue, type ModelFile, sampleRange } from './model-file.js'
export { computeModelId, SAMPLE_BYTES as MODEL_ID_SAMPLE_BYTES } from './model-id.js'
export { MAX_MODEL_NAME_LENGTH, parameterCount, readableModelName, sizeLabel } from './model-name.js'
export { type OpenModelOptions, openModelFile } from './open-model.js'
