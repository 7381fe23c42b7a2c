import { InvalidArgumentError, InvalidModelError } from '../errors.js'
import { f16Table } from '../f16.js'
import { tensorView } from '../fused-tensors.js'
import { configFromGguf, expectedShape, ggufTensorKey } from '../model/architectures.js'
import { type ByteSource, type ModelFile, sampleRange } from '../model/model-file.js'
import { vocabularyFromGguf } from '../tokenizers/tokenizer-files.js'
import type { TensorName, Vocabulary } from '../types.js'
import { RangedFile } from './file-reader.js'
import { type GgufTensorInfo, readGgufHeader } from './gguf-reader.js'

/** Open a GGUF model. Reads the header now and tensors on demand. */
export function openGgufModel(path: string): ModelFile {
  return openGgufModelFrom(new RangedFile(path))
}

/** A GGUF model over any byte source (a file, or ranges fetched over HTTP); closes it on failure. */
export function openGgufModelFrom(file: ByteSource): ModelFile {
  const path = file.path
  try {
    const header = readGgufHeader(file)
    const f16 = f16Table()
    const decodeVector = (t: GgufTensorInfo, name: string): Float32Array => {
      const bytes = file.read(t.offset, t.sizeBytes, name)
      if (t.dtype === 'f32') return new Float32Array(bytes.buffer, bytes.byteOffset, t.sizeBytes / 4)
      if (t.dtype === 'f16')
        return Float32Array.from(new Uint16Array(bytes.buffer, bytes.byteOffset, t.sizeBytes / 2), (x) => f16[x])
      throw new InvalidModelError(`${path}: 1-D tensor ${name} is ${t.dtype}; expected f32 or f16`)
    }
    const config = configFromGguf(header.metadata, header.tensors, path, (name) => {
      const t = header.tensors.get(`${name}.weight`)
      if (!t) throw new InvalidModelError(`${path}: tensor ${name}.weight is missing`)
      return decodeVector(t, name)
    })
    // Built on first use: nodes never tokenize, so opening a span must not parse (or reject) it.
    let vocabulary: Vocabulary | undefined
    const loadVocabulary = (): Vocabulary | undefined => {
      if (vocabulary === undefined && header.metadata.has('tokenizer.ggml.tokens'))
        vocabulary = vocabularyFromGguf(header.metadata, config.vocabSize)
      return vocabulary
    }
    const info = (name: TensorName): GgufTensorInfo => {
      const key = ggufTensorKey(name)
      // Fused (phi3) and stacked (MoE experts) tensors read as row ranges (fused-tensors.ts).
      const t = tensorView(name, config, header.tensors) ?? header.tensors.get(key)
      if (!t) throw new InvalidModelError(`${path}: tensor ${key} is missing`)
      const want = expectedShape(name, config)
      const got = [...t.ne].reverse()
      if (want && want.join(',') !== got.join(',')) {
        throw new InvalidModelError(`${path}: tensor ${key} is [${got}] but the config needs [${want}]`)
      }
      return t
    }
    for (let l = 0; l < config.nLayers; l++) info(`blk.${l}.attn_q`)
    const model: ModelFile = {
      format: 'gguf',
      path,
      config,
      get vocabulary() {
        return loadVocabulary()
      },
      metadata: header.metadata,
      weightDType: info('blk.0.attn_q').dtype,
      hasTensor: (name) => header.tensors.has(ggufTensorKey(name)) || tensorView(name, config, header.tensors) !== undefined,
      readMatrix(name) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        if (t.ne.length !== 2) throw new InvalidModelError(`${path}: tensor ${name} is not a matrix`)
        return { dtype: t.dtype, rows: t.ne[1], cols: t.ne[0], data: file.read(t.offset, t.sizeBytes, name) }
      },
      matrixInfo(name) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        if (t.ne.length !== 2) throw new InvalidModelError(`${path}: tensor ${name} is not a matrix`)
        return { dtype: t.dtype, rows: t.ne[1], cols: t.ne[0] }
      },
      readMatrixInto(name, into) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        file.read(t.offset, t.sizeBytes, name, into)
      },
      readMatrixRows(name, firstRow, count) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        const rows = t.ne[1]
        if (t.ne.length !== 2 || !(firstRow >= 0 && count >= 0 && firstRow + count <= rows))
          throw new InvalidArgumentError(`${path}: rows [${firstRow}, ${firstRow + count}) of ${name} (${rows} rows)`)
        const rowBytes = t.sizeBytes / rows
        const data = file.read(t.offset + firstRow * rowBytes, count * rowBytes, name)
        return { dtype: t.dtype, rows: count, cols: t.ne[0], data }
      },
      readVector(name) {
        return decodeVector(info(name), name)
      },
      sampleTensor(name, maxBytes) {
        const t = name === 'output' && config.tiedEmbeddings ? info('token_embd') : info(name)
        return sampleRange(t.sizeBytes, maxBytes, (at, n) => file.read(t.offset + at, n, name))
      },
      bytesRead: () => file.bytesRead(),
      close: () => file.close()
    }
    return model
  } catch (err) {
    file.close()
    throw err
  }
}
