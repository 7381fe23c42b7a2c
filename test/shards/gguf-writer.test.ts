import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError, InvalidModelError } from '../../shards/errors.js'
import { f32ToF16 } from '../../shards/f16.js'
import type { GgufTypedValue } from '../../shards/gguf-values.js'
import { writeGguf } from '../../shards/gguf-writer.js'
import { openModelFile } from '../../shards/open-model.js'
import { dequantizeRow, quantizeMatrix } from '../../shards/quant.js'
import {
  createRandomModel,
  MODEL_SHAPES,
  type ModelShape,
  parseShape,
  syntheticVocabulary,
  writeRandomModel
} from '../../shards/random-model.js'
import { BLOCK_TENSORS, type ModelConfig, type TensorName } from '../../shards/types.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gguf-writer-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** An independent GGUF parser (gguf.md), so the writer is not checked against the engine's reader. */
function parseGguf(file: Uint8Array) {
  const dv = new DataView(file.buffer, file.byteOffset, file.byteLength)
  let p = 0
  const at = (n: number) => (p += n) - n
  const u32 = () => dv.getUint32(at(4), true)
  const u64 = () => dv.getBigUint64(at(8), true)
  const str = () => {
    const n = Number(u64())
    return new TextDecoder().decode(file.subarray(at(n), p))
  }
  const scalar = (t: number): unknown => {
    switch (t) {
      case 0:
        return dv.getUint8(at(1))
      case 1:
        return dv.getInt8(at(1))
      case 2:
        return dv.getUint16(at(2), true)
      case 3:
        return dv.getInt16(at(2), true)
      case 4:
        return u32()
      case 5:
        return dv.getInt32(at(4), true)
      case 6:
        return dv.getFloat32(at(4), true)
      case 7:
        return dv.getUint8(at(1))
      case 8:
        return str()
      case 9: {
        const itemType = u32()
        const n = Number(u64())
        return { itemType, items: Array.from({ length: n }, () => scalar(itemType)) }
      }
      case 10:
        return u64()
      case 11:
        return dv.getBigInt64(at(8), true)
      case 12:
        return dv.getFloat64(at(8), true)
    }
    throw new Error(`bad type ${t}`)
  }
  const magic = new TextDecoder().decode(file.subarray(0, 4))
  p = 4
  const version = u32()
  const nTensors = Number(u64())
  const nKv = Number(u64())
  const kv = new Map<string, { type: number; value: unknown }>()
  for (let i = 0; i < nKv; i++) {
    const key = str()
    const type = u32()
    kv.set(key, { type, value: scalar(type) })
  }
  const tensors = Array.from({ length: nTensors }, () => {
    const name = str()
    const nDims = u32()
    const ne = Array.from({ length: nDims }, () => Number(u64()))
    return { name, ne, type: u32(), offset: Number(u64()) }
  })
  const alignment = (kv.get('general.alignment')?.value as number | undefined) ?? 32
  const dataStart = Math.ceil(p / alignment) * alignment
  return { magic, version, kv, tensors, alignment, headerEnd: p, dataStart }
}

const f32Bytes = (values: number[]) => new Uint8Array(new Float32Array(values).buffer)

describe('writeGguf', () => {
  it('writes a minimal file byte for byte as gguf.md lays it out', () => {
    const path = join(dir, 'minimal.gguf')
    writeGguf(path, {
      metadata: [['general.architecture', { type: 'string', value: 'llama' }]],
      tensors: [{ name: 'a', dtype: 'f32', shape: [2], data: f32Bytes([1.5, -2]) }]
    })
    const expected = Buffer.alloc(160)
    let o = expected.write('GGUF', 0, 'latin1')
    o = expected.writeUInt32LE(3, o) // version
    o = expected.writeBigUInt64LE(1n, o) // tensor_count
    o = expected.writeBigUInt64LE(1n, o) // metadata_kv_count
    o = expected.writeBigUInt64LE(20n, o)
    o += expected.write('general.architecture', o, 'latin1')
    o = expected.writeUInt32LE(8, o) // STRING
    o = expected.writeBigUInt64LE(5n, o)
    o += expected.write('llama', o, 'latin1')
    o = expected.writeBigUInt64LE(1n, o)
    o += expected.write('a', o, 'latin1')
    o = expected.writeUInt32LE(1, o) // n_dimensions
    o = expected.writeBigUInt64LE(2n, o) // ne[0]
    o = expected.writeUInt32LE(0, o) // GGML_TYPE_F32
    o = expected.writeBigUInt64LE(0n, o) // offset
    expect(o).toBe(102)
    expected.writeFloatLE(1.5, 128) // data starts at the next multiple of 32
    expected.writeFloatLE(-2, 132)
    expect(Buffer.from(readFileSync(path)).equals(expected)).toBe(true)
  })

  it('round-trips every metadata type, tensor infos, aligned offsets and f32/f16/q8_0 data', () => {
    const path = join(dir, 'all.gguf')
    const f16 = new Uint8Array(new Uint16Array([1, 2, 3, 4, 5, 6, 7, 8].map((x) => f32ToF16(x / 3))).buffer)
    const q8 = quantizeMatrix(
      Float32Array.from({ length: 64 }, (_, i) => Math.sin(i)),
      2,
      32,
      'q8_0'
    ).data
    const f32 = f32Bytes([0.25, -1, 3])
    let calls = 0
    const metadata: Array<[string, GgufTypedValue]> = [
      ['general.architecture', { type: 'string', value: 'llama' }],
      ['t.u8', { type: 'u8', value: 255 }],
      ['t.i8', { type: 'i8', value: -128 }],
      ['t.u16', { type: 'u16', value: 65535 }],
      ['t.i16', { type: 'i16', value: -2 }],
      ['t.u32', { type: 'u32', value: 0xfffffffe }],
      ['t.i32', { type: 'i32', value: -7 }],
      ['t.f32', { type: 'f32', value: 0.1 }],
      ['t.f64', { type: 'f64', value: 0.1 }],
      ['t.bool', { type: 'bool', value: true }],
      ['t.str', { type: 'string', value: 'h\u00e9llo \u2581' }],
      ['t.u64', { type: 'u64', value: 2n ** 63n + 5n }],
      ['t.i64', { type: 'i64', value: -3 }],
      ['t.arr', { type: 'array', itemType: 'i32', value: [1, -2, 3] }],
      ['t.strs', { type: 'array', itemType: 'string', value: ['a', '', '\u2581b'] }]
    ]
    writeGguf(path, {
      alignment: 64,
      metadata,
      tensors: [
        { name: 'x.f32', dtype: 'f32', shape: [3], data: f32 },
        {
          name: 'x.f16',
          dtype: 'f16',
          shape: [4, 2],
          data: () => {
            calls++
            return f16
          }
        },
        { name: 'x.q8', dtype: 'q8_0', shape: [32, 2], data: q8 }
      ]
    })
    expect(calls).toBe(1)
    const file = readFileSync(path)
    const g = parseGguf(file)
    expect([g.magic, g.version, g.kv.size, g.tensors.length]).toEqual(['GGUF', 3, metadata.length + 1, 3])
    expect(g.kv.get('general.alignment')).toEqual({ type: 4, value: 64 })
    const v = (k: string) => g.kv.get(k)
    expect([v('t.u8'), v('t.i8'), v('t.u16'), v('t.i16')]).toEqual([
      { type: 0, value: 255 },
      { type: 1, value: -128 },
      { type: 2, value: 65535 },
      { type: 3, value: -2 }
    ])
    expect([v('t.u32'), v('t.i32'), v('t.f32'), v('t.f64')]).toEqual([
      { type: 4, value: 0xfffffffe },
      { type: 5, value: -7 },
      { type: 6, value: Math.fround(0.1) },
      { type: 12, value: 0.1 }
    ])
    expect([v('t.bool'), v('t.str'), v('t.u64'), v('t.i64')]).toEqual([
      { type: 7, value: 1 },
      { type: 8, value: 'h\u00e9llo \u2581' },
      { type: 10, value: 2n ** 63n + 5n },
      { type: 11, value: -3n }
    ])
    expect(v('t.arr')).toEqual({ type: 9, value: { itemType: 5, items: [1, -2, 3] } })
    expect(v('t.strs')).toEqual({ type: 9, value: { itemType: 8, items: ['a', '', '\u2581b'] } })
    expect(g.tensors.map((t) => [t.name, t.ne, t.type, t.offset])).toEqual([
      ['x.f32', [3], 0, 0],
      ['x.f16', [4, 2], 1, 64],
      ['x.q8', [32, 2], 8, 128]
    ])
    expect(g.dataStart % 64).toBe(0)
    expect(g.dataStart - g.headerEnd).toBeLessThan(64)
    for (const [i, data] of [f32, f16, q8].entries()) {
      const at = g.dataStart + g.tensors[i].offset
      expect(file.subarray(at, at + data.length).equals(data)).toBe(true)
    }
    expect(file.length).toBe(g.dataStart + 128 + 128) // 68 bytes of q8_0, padded like llama.cpp
  })

  it('rejects bad input before creating the file, and removes a partial file', () => {
    const path = join(dir, 'bad.gguf')
    const t = { name: 'a', dtype: 'f32' as const, shape: [2], data: f32Bytes([1, 2]) }
    const arch: [string, GgufTypedValue] = ['general.architecture', { type: 'string', value: 'llama' }]
    const bad = (init: Parameters<typeof writeGguf>[1]) => () => writeGguf(path, init)
    expect(bad({ metadata: [arch, arch], tensors: [] })).toThrow(InvalidArgumentError)
    expect(bad({ metadata: [['k', { type: 'u32', value: -1 }]], tensors: [] })).toThrow(InvalidArgumentError)
    expect(bad({ metadata: [['k', { type: 'u8', value: 1.5 }]], tensors: [] })).toThrow(InvalidArgumentError)
    expect(bad({ metadata: [['k', { type: 'u64', value: -1n }]], tensors: [] })).toThrow(InvalidArgumentError)
    expect(bad({ metadata: [], tensors: [t, t] })).toThrow(/appears twice/)
    expect(bad({ metadata: [], tensors: [{ ...t, name: 'n'.repeat(65) }] })).toThrow(InvalidArgumentError)
    expect(bad({ metadata: [], tensors: [{ ...t, dtype: 'q8_0', shape: [16, 2] }] })).toThrow(InvalidArgumentError)
    expect(bad({ metadata: [], tensors: [{ ...t, shape: [1, 1, 1, 1, 2] }] })).toThrow(InvalidArgumentError)
    expect(bad({ metadata: [], tensors: [], alignment: 12 })).toThrow(InvalidArgumentError)
    expect(existsSync(path)).toBe(false)
    expect(bad({ metadata: [], tensors: [{ ...t, data: () => f32Bytes([1]) }] })).toThrow(/expected 8 bytes/)
    expect(existsSync(path)).toBe(false)
  })
})

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
