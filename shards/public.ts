/**
 * `layerswarm/shards`: the engine. Open a GGUF or llama2.c model, run it (or any span of its
 * blocks) in one process, tokenize and sample; a kernel set is the plug-in point. The folder's full
 * API (`shards/index.ts`) is internal; this list is the package's promise (docs/api.md, issue 36).
 *
 * @packageDocumentation
 * @example
 * ```ts
 * import { createEdge, createLocalPipeline, createShard, createTokenizer, generateTokens, openModelFile } from 'layerswarm/shards'
 *
 * const model = openModelFile('stories260K.gguf') // reads the header only
 * const tokenizer = createTokenizer(model.vocabulary!)
 * const edge = createEdge({ model }) // embeddings, final norm, LM head
 * const shards = [createShard({ model, start: 0, end: 2 }), createShard({ model, start: 2, end: 5 })]
 * const pipeline = createLocalPipeline(shards, 'session-1', 512)
 * const prompt = tokenizer.encode('Once upon a time')
 * for await (const id of generateTokens({ edge, pipeline, promptTokens: prompt, maxTokens: 32, temperature: 0 }))
 *   process.stdout.write(tokenizer.decode([id]))
 * ```
 */
// The list: model files; running blocks (shards, the edge, a local pipeline, the decode loop);
// text in and out; the kernel-set plug-in point with the types it implements; the error base class.
export {
  type AbortOptions,
  type Architecture,
  type AttentionShape,
  type BlockPipeline,
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createSampler,
  createShard,
  createTokenizer,
  Edge,
  type EdgeInit,
  EngineError,
  type GenerateInit,
  type GgufInit,
  generateTokens,
  type KernelPlacement,
  type Kernels,
  type KvLayer,
  type LocalPipelineOptions,
  type ModelConfig,
  type ModelFile,
  type OpenModelOptions,
  openModelFile,
  type PrepareOptions,
  type Sampler,
  type SamplerOptions,
  Shard,
  type ShardInit,
  selectKernels,
  type Tokenizer,
  type Vocabulary,
  type WeightMatrix,
  writeGguf
} from './index.js'
