import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../shards/errors.js'
import { f32ToF16 } from '../../shards/f16.js'
import type { GgufTypedValue } from '../../shards/formats/gguf-values.js'
import { writeGguf } from '../../shards/formats/gguf-writer.js'
import { quantizeMatrix } from '../../shards/quant/codecs.js'
import { parseGguf } from '../helpers/gguf-parse.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gguf-writer-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

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
