import type { ModelConfig, TensorName, Vocabulary, WeightMatrix } from '../types.js'

/** A GGUF metadata value: numbers (uint64/int64 as bigint), booleans, strings, or arrays of them. */
export type GgufValue = number | bigint | boolean | string | GgufValue[]

/**
 * An opened model file. Tensors are read on demand with ranged reads, so a shard that asks
 * only for its blocks never reads the rest of the file. `bytesRead` counts tensor bytes read.
 */
export interface ModelFile {
  readonly format: 'gguf' | 'llama2c' | 'memory'
  readonly path: string
  readonly config: ModelConfig
  /** The tokenizer vocabulary stored in the file (GGUF); llama2.c files need a tokenizer.bin. */
  readonly vocabulary?: Vocabulary
  /** GGUF key/value metadata (empty for other formats). */
  readonly metadata: ReadonlyMap<string, GgufValue>
  /** Storage dtype of the block matrices (the first one's), for display. */
  readonly weightDType: WeightMatrix['dtype']
  hasTensor(name: TensorName): boolean
  /** A 2-D tensor as stored ([rows, cols], row-major). */
  readMatrix(name: TensorName): WeightMatrix
  /** Shape and dtype of a 2-D tensor without reading it (optional; with readMatrixInto). */
  matrixInfo?(name: TensorName): Omit<WeightMatrix, 'data'>
  /** Read a 2-D tensor's stored bytes straight into `into` (e.g. kernel memory), no other copy. */
  readMatrixInto?(name: TensorName, into: Uint8Array): void
  /**
   * Rows [firstRow, firstRow + count) of a 2-D tensor as stored, read alone (optional): the
   * client's head rows (issue #35 item 4) without the whole head in memory.
   */
  readMatrixRows?(name: TensorName, firstRow: number, count: number): WeightMatrix
  /** A 1-D tensor (norm weights), decoded to f32. */
  readVector(name: TensorName): Float32Array
  /**
   * Up to `maxBytes` of a tensor's stored bytes: its first and last halves (all of it when
   * smaller). The model id hashes these, so it needs no full read of the file.
   */
  sampleTensor(name: TensorName, maxBytes: number): Uint8Array
  /** Bytes read from the file so far (header and tensors). */
  bytesRead(): number
  close(): void
}

/**
 * Where a model file's bytes come from: a local file (RangedFile) or bytes fetched beforehand
 * (the browser client's HTTP range requests, client/browser/model-url.ts). Reads are synchronous.
 */
export interface ByteSource {
  readonly path: string
  readonly sizeBytes: number
  /** Exactly `length` bytes at `offset` (into `into` when given), or a typed error. */
  read(offset: number, length: number, what: string, into?: Uint8Array): Uint8Array
  bytesRead(): number
  close(): void
}

/** The first and last halves of a range of `size` bytes, at most `maxBytes` in all. */
export function sampleRange(size: number, maxBytes: number, read: (offset: number, length: number) => Uint8Array): Uint8Array {
  if (size <= maxBytes) return read(0, size)
  const half = Math.floor(maxBytes / 2)
  const out = new Uint8Array(2 * half)
  out.set(read(0, half), 0)
  out.set(read(size - half, half), half)
  return out
}
