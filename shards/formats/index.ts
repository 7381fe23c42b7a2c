// Model file formats: GGUF reader and writer, llama2.c, random test models.

export { RangedFile } from './file-reader.js'
export { openGgufModelFrom } from './gguf-model.js'
export { type GgufHeader, type GgufTensorInfo, readGgufHeader } from './gguf-reader.js'
export type { GgufTypedValue } from './gguf-values.js'
export { type GgufInit, writeGguf } from './gguf-writer.js'
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
export * from './weights-manifest.js'
export * from './weights-pieces.js'
export * from './weights-store.js'
