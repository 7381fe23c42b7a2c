import { closeSync, openSync, rmSync, writeSync } from 'node:fs'
import { InvalidArgumentError } from '../errors.js'
import { rowBytes } from '../quant/codecs.js'
import { isModelFileType, LLAMA_FTYPE, type ModelFileType } from '../quant/file-types.js'
import { QUANT_LAYOUTS, type QuantDType } from '../quant/quant-blocks.js'
import type { ModelConfig, Vocabulary, WeightMatrix } from '../types.js'
import { ByteWriter, checkScalar, encoder, type GgufTypedValue, VALUE_TYPE, writeScalar } from './gguf-values.js'

/**
 * GGUF v3 writer, per ggml's docs/gguf.md: magic "GGUF", u32 version, u64 tensor count,
 * u64 metadata count, metadata key/values, tensor infos (name, u32 n_dims, u64 ne[n_dims],
 * u32 ggml type, u64 offset relative to the data section), padding to `general.alignment`,
 * then the tensor data, each tensor starting at a multiple of the alignment. Tensor data is
 * streamed to the file one tensor at a time, so a multi-GB model never sits in one buffer.
 */

export interface GgufTensorInit {
  readonly name: string
  readonly dtype: WeightMatrix['dtype']
  /** GGUF ne order: ne[0] is the innermost (column) dimension. A [rows, cols] matrix is [cols, rows]. */
  readonly shape: readonly number[]
  /** The raw bytes, or a function called once, when the tensor is written (lazy generation). */
  readonly data: Uint8Array | (() => Uint8Array)
}

export interface GgufInit {
  readonly metadata: ReadonlyArray<readonly [key: string, value: GgufTypedValue]>
  readonly tensors: readonly GgufTensorInit[]
  /** general.alignment; 32 (the GGUF default) unless given. Written as metadata when not 32. */
  readonly alignment?: number
}

const GGUF_MAGIC = 0x46554747 // "GGUF" read as a little-endian u32
const GGUF_VERSION = 3
const DEFAULT_ALIGNMENT = 32
/** gguf.md: "name: ... at most 64 bytes" (GGML_MAX_NAME). */
const MAX_TENSOR_NAME_BYTES = 64
const MAX_KEY_BYTES = 65535
const GGML_TYPE: Record<WeightMatrix['dtype'], number> = {
  f32: 0,
  f16: 1,
  q8_0: 8,
  ...(Object.fromEntries(Object.entries(QUANT_LAYOUTS).map(([dtype, l]) => [dtype, l.ggmlType])) as Record<QuantDType, number>)
}
/** Bytes of a tensor's data: rows of ne[0] elements, times the other dimensions. */
export function ggufTensorBytes(dtype: WeightMatrix['dtype'], shape: readonly number[]): number {
  if (shape.length < 1 || shape.length > 4)
    throw new InvalidArgumentError(`a GGUF tensor has 1 to 4 dimensions, got ${shape.length}`)
  for (const n of shape) if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`bad tensor dimension ${n}`)
  return rowBytes(dtype, shape[0]) * shape.slice(1).reduce((a, b) => a * b, 1)
}

function buildHeader(init: GgufInit, alignment: number): { header: Uint8Array; sizes: number[] } {
  const metadata: Array<readonly [string, GgufTypedValue]> = [...init.metadata]
  const keys = new Set<string>()
  for (const [key] of metadata) {
    const n = encoder.encode(key).length
    if (n === 0 || n > MAX_KEY_BYTES) throw new InvalidArgumentError(`metadata key "${key}" must be 1..${MAX_KEY_BYTES} bytes`)
    if (keys.has(key)) throw new InvalidArgumentError(`metadata key ${key} appears twice`)
    keys.add(key)
  }
  const given = metadata.find(([key]) => key === 'general.alignment')
  if (given !== undefined) {
    if (given[1].type !== 'u32' || given[1].value !== alignment) {
      throw new InvalidArgumentError(`general.alignment in metadata must be the u32 ${alignment} (the alignment option)`)
    }
  } else if (alignment !== DEFAULT_ALIGNMENT) {
    metadata.push(['general.alignment', { type: 'u32', value: alignment }]) // gguf.md: a u32
  }
  const w = new ByteWriter()
  w.u32(GGUF_MAGIC)
  w.u32(GGUF_VERSION)
  w.u64(BigInt(init.tensors.length))
  w.u64(BigInt(metadata.length))
  for (const [key, v] of metadata) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(VALUE_TYPE, v.type)) {
      throw new InvalidArgumentError(`metadata ${key}: not a typed GGUF value`)
    }
    w.string(key)
    w.u32(VALUE_TYPE[v.type])
    if (v.type === 'array') {
      // Arrays of arrays are legal GGUF but nothing the engine writes needs them.
      if (!Object.hasOwn(VALUE_TYPE, v.itemType) || v.itemType === ('array' as string) || !Array.isArray(v.value)) {
        throw new InvalidArgumentError(`metadata ${key}: arrays hold scalars of one GGUF type`)
      }
      w.u32(VALUE_TYPE[v.itemType])
      w.u64(BigInt(v.value.length))
      for (const x of v.value) {
        checkScalar(v.itemType, x, key)
        writeScalar(w, v.itemType, x)
      }
    } else {
      checkScalar(v.type, v.value, key)
      writeScalar(w, v.type, v.value)
    }
  }
  const names = new Set<string>()
  const sizes: number[] = []
  let offset = 0
  for (const t of init.tensors) {
    const n = encoder.encode(t.name).length
    if (n === 0 || n > MAX_TENSOR_NAME_BYTES) throw new InvalidArgumentError(`tensor name "${t.name}" must be 1..64 bytes`)
    if (names.has(t.name)) throw new InvalidArgumentError(`tensor ${t.name} appears twice`)
    if (!Object.hasOwn(GGML_TYPE, t.dtype))
      throw new InvalidArgumentError(`tensor ${t.name}: unsupported dtype ${String(t.dtype)}`)
    names.add(t.name)
    const size = ggufTensorBytes(t.dtype, t.shape)
    w.string(t.name)
    w.u32(t.shape.length)
    for (const d of t.shape) w.u64(BigInt(d))
    w.u32(GGML_TYPE[t.dtype])
    w.u64(BigInt(offset))
    sizes.push(size)
    offset += Math.ceil(size / alignment) * alignment
  }
  w.padTo(alignment)
  return { header: w.bytes(), sizes }
}

/** writeSync may write less than asked; large buffers also go in bounded pieces. */
function writeAll(fd: number, bytes: Uint8Array): void {
  const MAX_CHUNK = 1 << 30
  let done = 0
  while (done < bytes.length) {
    done += writeSync(fd, bytes, done, Math.min(bytes.length - done, MAX_CHUNK))
  }
}

/**
 * Write a GGUF v3 file. Validates everything before creating the file; if writing fails
 * part-way (a lazy tensor throws or has the wrong size), the partial file is removed.
 */
export function writeGguf(path: string, init: GgufInit): void {
  if (typeof path !== 'string' || path.length === 0) throw new InvalidArgumentError('writeGguf needs a file path')
  if (init === null || typeof init !== 'object' || !Array.isArray(init.metadata) || !Array.isArray(init.tensors)) {
    throw new InvalidArgumentError('writeGguf needs { metadata: [...], tensors: [...] }')
  }
  const alignment = init.alignment ?? DEFAULT_ALIGNMENT
  // gguf.md requires a multiple of 8; ggml additionally requires a power of two.
  if (!Number.isSafeInteger(alignment) || alignment < 8 || alignment > 1 << 30 || (alignment & (alignment - 1)) !== 0) {
    throw new InvalidArgumentError(`alignment must be a power of two >= 8, got ${alignment}`)
  }
  const { header, sizes } = buildHeader(init, alignment)
  const padding = new Uint8Array(alignment)
  const fd = openSync(path, 'w')
  try {
    writeAll(fd, header)
    init.tensors.forEach((t, i) => {
      const data = typeof t.data === 'function' ? t.data() : t.data
      if (!(data instanceof Uint8Array) || data.length !== sizes[i]) {
        throw new InvalidArgumentError(`tensor ${t.name}: expected ${sizes[i]} bytes of ${t.dtype} data, got ${data?.length}`)
      }
      writeAll(fd, data)
      // llama.cpp's gguf writer pads after every tensor, the last one included.
      writeAll(fd, padding.subarray(0, (alignment - (sizes[i] % alignment)) % alignment))
    })
  } catch (err) {
    closeSync(fd)
    rmSync(path, { force: true }) // a partial file would look like a GGUF with missing tensors
    throw err
  }
  closeSync(fd)
}

/**
 * The metadata llama.cpp reads for `general.architecture = llama` and its SentencePiece
 * tokenizer (gguf.md "LLaMA" and "Tokenizer" sections), in the order its converter writes them.
 */
export function llamaGgufMetadata(
  name: string,
  c: ModelConfig,
  v: Vocabulary,
  fileType: ModelFileType
): Array<[string, GgufTypedValue]> {
  if (v?.pieces?.length !== c?.vocabSize)
    throw new InvalidArgumentError(`vocabulary has ${v?.pieces?.length} pieces, model ${c?.vocabSize}`)
  if (!isModelFileType(fileType)) throw new InvalidArgumentError(`unknown file type ${fileType}`)
  const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value })
  const f32 = (value: number): GgufTypedValue => ({ type: 'f32', value })
  return [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: name }],
    ['general.file_type', u32(LLAMA_FTYPE[fileType])],
    ['general.quantization_version', u32(2)], // GGML_QNT_VERSION, written by llama.cpp's converter
    ...(
      [
        ['vocab_size', c.vocabSize],
        ['context_length', c.seqLen],
        ['embedding_length', c.dim],
        ['feed_forward_length', c.hiddenDim],
        ['block_count', c.nLayers],
        ['attention.head_count', c.nHeads],
        ['attention.head_count_kv', c.nKvHeads],
        ['rope.dimension_count', c.headDim]
      ] as const
    ).map(([k, n]): [string, GgufTypedValue] => [`llama.${k}`, u32(n)]),
    ['llama.rope.freq_base', f32(c.ropeTheta)],
    ['llama.attention.layer_norm_rms_epsilon', f32(c.rmsEps)],
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    // SentencePiece stores spaces as U+2581 (LOWER ONE EIGHTH BLOCK).
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: v.pieces.map((p) => p.replaceAll(' ', '\u2581')) }],
    ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', value: Array.from(v.scores) }],
    ...(v.types
      ? [
          ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: Array.from(v.types) }] as [
            string,
            GgufTypedValue
          ]
        ]
      : []),
    ['tokenizer.ggml.bos_token_id', u32(v.bosId)],
    ['tokenizer.ggml.eos_token_id', u32(v.eosId)],
    ['tokenizer.ggml.unknown_token_id', u32(v.unkId)],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: true }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }]
  ]
}
