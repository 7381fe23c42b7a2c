import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError, InvalidModelError } from '../../shards/errors.js'
import {
  createRandomModel,
  MODEL_SHAPES,
  type ModelShape,
  parseShape,
  syntheticVocabulary,
  writeRandomModel
} from '../../shards/formats/random-model.js'
import { openModelFile } from '../../shards/model/open-model.js'
import { dequantizeRow, quantizeMatrix } from '../../shards/quant/codecs.js'
import { BLOCK_TENSORS, type ModelConfig, type TensorName } from '../../shards/types.js'
import { parseGguf } from '../helpers/gguf-parse.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-random-model-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('syntheticVocabulary', () => {
  it.each([300, 32000])('is a valid SentencePiece vocabulary of %i pieces', (n) => {
    const v = syntheticVocabulary(n)
    expect(v.pieces.length).toBe(n)
    expect(new Set(v.pieces).size).toBe(n)
    expect(v.pieces.slice(0, 3)).toEqual(['<unk>', '<s>', '</s>'])
    expect([v.unkId, v.bosId, v.eosId]).toEqual([0, 1, 2])
    for (let b = 0; b < 256; b++) {
      expect(v.pieces[3 + b]).toBe(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)
      expect(v.types?.[3 + b]).toBe(6)
    }
    expect([v.types?.[0], v.types?.[1], v.types?.[2], v.types?.[259], v.types?.[n - 1]]).toEqual([2, 3, 3, 1, 1])
    expect(v.scores.subarray(0, 259).every((s) => s === 0)).toBe(true)
    expect(v.scores.subarray(260).every((s, i) => s < v.scores[259 + i])).toBe(true)
    expect(v.pieces).toContain(' ')
    expect(v.pieces).toContain(' a')
    expect(syntheticVocabulary(n)).toEqual(v)
  })

  it('holds whole words and their prefixes when there is room', () => {
    const v = syntheticVocabulary(32000)
    for (const p of [' the', ' th', 'the', ' once', ' upon', ' story']) expect(v.pieces).toContain(p)
    expect(v.pieces[31999]).toMatch(/^ tok\d+$/)
    expect(() => syntheticVocabulary(259)).toThrow(InvalidArgumentError)
    expect(() => syntheticVocabulary(300.5)).toThrow(InvalidArgumentError)
  })
})

describe('parseShape', () => {
  it('knows the named shapes and parses custom ones', () => {
    expect(parseShape('tiny')).toMatchObject({ dim: 64, nLayers: 3, nHeads: 4, nKvHeads: 2, hiddenDim: 96, vocabSize: 300 })
    expect(parseShape('110m')).toMatchObject({
      dim: 768,
      nLayers: 12,
      nHeads: 12,
      nKvHeads: 12,
      hiddenDim: 2048,
      vocabSize: 32000,
      tied: true
    })
    expect(parseShape('1.1B')).toMatchObject({ dim: 2048, nLayers: 22, nHeads: 32, nKvHeads: 4, hiddenDim: 5632, tied: false })
    expect(parseShape(' 128, 2, 8, 4, 256, 512 ')).toMatchObject({
      dim: 128,
      nLayers: 2,
      nHeads: 8,
      nKvHeads: 4,
      hiddenDim: 256,
      vocabSize: 512,
      tied: false
    })
    expect(parseShape('128,2,8,4,256,512,tied').tied).toBe(true)
  })

  it.each([
    ['huge', /unknown shape/],
    ['constructor', /unknown shape/],
    ['64,3,4,2,96', /unknown shape/],
    ['64,3,5,1,96,300', /not a multiple of heads/],
    ['64,3,4,3,96,300', /not a multiple of kvHeads/],
    ['36,3,4,2,96,300', /must be even/],
    ['64,0,4,2,96,300', /not a positive integer/],
    ['64,3,4,2,9x6,300', /not a positive integer/],
    ['64,3,4,2,96,-300', /not a positive integer/],
    ['64,3,4,2,96,100', /below 260/],
    ['64,3,4,2,96,300,maybe', /tied or untied/]
  ])('rejects %s', (spec, message) => {
    expect(() => parseShape(spec)).toThrow(InvalidArgumentError)
    expect(() => parseShape(spec)).toThrow(message)
  })
})

function tensorNames(c: ModelConfig): TensorName[] {
  const names: TensorName[] = ['token_embd', 'output_norm', 'output']
  for (let l = 0; l < c.nLayers; l++) for (const t of BLOCK_TENSORS) names.push(`blk.${l}.${t}`)
  return names
}
const isVector = (name: string) => name.endsWith('norm')
const tiny = MODEL_SHAPES.tiny
const tinyTied = parseShape('64,2,4,4,64,288,tied')

describe('createRandomModel', () => {
  it('is deterministic in its seed, tensor by tensor', () => {
    const a = createRandomModel(tiny, { dtype: 'q8_0', seed: 7 })
    const b = createRandomModel(tiny, { dtype: 'q8_0', seed: 7 })
    const c = createRandomModel(tiny, { dtype: 'q8_0', seed: 8 })
    for (const name of tensorNames(a.config)) {
      if (isVector(name)) {
        expect(b.readVector(name)).toEqual(a.readVector(name))
        expect(c.readVector(name)).not.toEqual(a.readVector(name))
      } else {
        expect(Buffer.from(b.readMatrix(name).data).equals(a.readMatrix(name).data)).toBe(true)
        expect(Buffer.from(c.readMatrix(name).data).equals(a.readMatrix(name).data)).toBe(false)
      }
    }
  })

  it('holds the same weights in every dtype, quantized with quantizeMatrix', () => {
    const f32 = createRandomModel(tiny, { dtype: 'f32', seed: 3 })
    for (const dtype of ['f16', 'q8_0'] as const) {
      const m = createRandomModel(tiny, { dtype, seed: 3 })
      for (const name of ['token_embd', 'blk.2.ffn_down', 'output'] as const) {
        const w = f32.readMatrix(name)
        const values = new Float32Array(w.data.buffer, w.data.byteOffset, w.rows * w.cols)
        expect(Buffer.from(m.readMatrix(name).data).equals(quantizeMatrix(values, w.rows, w.cols, dtype).data)).toBe(true)
      }
    }
  })

  it('has sane weights: matrices within ±1/sqrt(cols), centred; norm weights near 1', () => {
    const m = createRandomModel(tiny, { dtype: 'f32', seed: 1 })
    const w = m.readMatrix('blk.0.ffn_down')
    expect([w.rows, w.cols]).toEqual([64, 96])
    const row = new Float32Array(w.cols)
    let sum = 0
    let max = 0
    for (let r = 0; r < w.rows; r++) {
      dequantizeRow(w, r, row)
      for (const x of row) {
        sum += x
        max = Math.max(max, Math.abs(x))
      }
    }
    expect(max).toBeLessThanOrEqual(1 / Math.sqrt(96))
    expect(max).toBeGreaterThan(0.9 / Math.sqrt(96))
    expect(Math.abs(sum / (w.rows * w.cols))).toBeLessThan(0.01)
    for (const x of m.readVector('blk.1.ffn_norm')) expect(Math.abs(x - 1)).toBeLessThanOrEqual(0.1)
  })

  it('generates tensors lazily and counts the bytes read', () => {
    const big = createRandomModel(MODEL_SHAPES['1.1b'], { dtype: 'f32', seed: 1 })
    expect(big.bytesRead()).toBe(0)
    expect(big.config).toMatchObject({ dim: 2048, kvDim: 256, headDim: 64, vocabSize: 32000, tiedEmbeddings: false })
    expect(big.readMatrix('blk.21.attn_k')).toMatchObject({ rows: 256, cols: 2048, dtype: 'f32' })
    expect(big.bytesRead()).toBe(256 * 2048 * 4)
    expect(big.readVector('blk.21.attn_norm').length).toBe(2048)
    expect(big.bytesRead()).toBe(256 * 2048 * 4 + 2048 * 4)
    big.readMatrix('blk.21.attn_k') // a second read counts again, as a file read would
    expect(big.bytesRead()).toBe(2 * 256 * 2048 * 4 + 2048 * 4)
  })

  it('describes itself as the GGUF file it would be written as', () => {
    const m = createRandomModel(tiny, { dtype: 'q8_0', seed: 1, seqLen: 64 })
    expect([m.format, m.weightDType, m.config.seqLen, m.config.rmsEps]).toEqual(['memory', 'q8_0', 64, Math.fround(1e-5)])
    expect(m.metadata.get('general.architecture')).toBe('llama')
    expect(m.metadata.get('general.file_type')).toBe(7)
    expect(m.metadata.get('llama.rope.dimension_count')).toBe(16)
    expect(m.metadata.get('llama.attention.head_count_kv')).toBe(2)
    expect((m.metadata.get('tokenizer.ggml.tokens') as string[])[259]).toBe('\u2581')
    expect(m.vocabulary).toEqual(syntheticVocabulary(300))
    expect(m.hasTensor('output')).toBe(true)
    expect(() => m.readMatrix('blk.3.attn_q')).toThrow(InvalidModelError)
    expect(() => m.readMatrix('blk.0.attn_norm')).toThrow(InvalidArgumentError)
    expect(() => createRandomModel(parseShape('48,1,4,2,96,300'), { dtype: 'q8_0', seed: 1 })).toThrow(/multiples of 32/)
    expect(() => createRandomModel(tiny, { dtype: 'q3_k' as 'f32', seed: 1 })).toThrow(InvalidArgumentError)
    expect(() => createRandomModel(tiny, { dtype: 'f32', seed: 0.5 })).toThrow(InvalidArgumentError)
    const tied = createRandomModel(tinyTied, { dtype: 'f16', seed: 1 })
    expect(tied.hasTensor('output')).toBe(false)
    expect(tied.readMatrix('output').data).toEqual(tied.readMatrix('token_embd').data)
  })
})

describe('writeRandomModel', () => {
  const cases: Array<[string, 'f32' | 'f16' | 'q8_0', ModelShape]> = []
  for (const dtype of ['f32', 'f16', 'q8_0'] as const) cases.push(['tiny (untied)', dtype, tiny], ['tied', dtype, tinyTied])

  it.each(cases)('writes a %s %s model exactly as createRandomModel holds it', (_, dtype, shape) => {
    const path = join(dir, `${shape.name}-${dtype}.gguf`)
    const { bytes } = writeRandomModel(path, shape, { dtype, seed: 42 })
    const file = readFileSync(path)
    expect(file.length).toBe(bytes)
    const g = parseGguf(file)
    const types = new Map(g.tensors.map((t) => [t.name, t.type]))
    const ggmlType = { f32: 0, f16: 1, q8_0: 8 }[dtype]
    expect([types.get('token_embd.weight'), types.get('blk.0.ffn_up.weight'), types.get('output_norm.weight')]).toEqual([
      ggmlType,
      ggmlType,
      0
    ])
    expect(types.has('output.weight')).toBe(!shape.tied)
    expect(g.tensors.every((t) => t.offset % 32 === 0)).toBe(true)

    const mem = createRandomModel(shape, { dtype, seed: 42 })
    const disk = openModelFile(path)
    try {
      expect(disk.config).toEqual(mem.config)
      // the file also records what the in-memory vocabulary leaves implicit (model, add_bos, add_eos)
      expect(disk.vocabulary).toMatchObject(mem.vocabulary!)
      expect(disk.metadata).toEqual(mem.metadata)
      expect(disk.weightDType).toBe(dtype)
      for (const name of tensorNames(mem.config)) {
        expect(disk.hasTensor(name)).toBe(mem.hasTensor(name))
        if (isVector(name)) {
          expect(disk.readVector(name)).toEqual(mem.readVector(name))
        } else {
          const a = disk.readMatrix(name)
          const b = mem.readMatrix(name)
          expect([a.dtype, a.rows, a.cols]).toEqual([b.dtype, b.rows, b.cols])
          expect(Buffer.from(a.data).equals(b.data)).toBe(true)
        }
      }
    } finally {
      disk.close()
    }
  })
})
