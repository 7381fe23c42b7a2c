import { describe, expect, it } from 'vitest'
import {
  BadShapeError,
  decodeTensor,
  encodeTensor,
  f16ToF32,
  f32ToF16,
  MalformedMessageError,
  MessageTooLargeError,
  NonFiniteTensorError,
  Q8_0_BLOCK_BYTES,
  tensorByteLength
} from '../../protocol/index.js'

/** Deterministic values in [-scale, scale) (mulberry32). */
function random(n: number, seed: number, scale = 1): Float32Array {
  let a = seed >>> 0
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    out[i] = ((((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1) * scale
  }
  return out
}

describe('f16 conversion', () => {
  it('matches known bit patterns', () => {
    const cases: Array<[number, number]> = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.1, 0x2e66],
      [1 / 3, 0x3555],
      [65504, 0x7bff], // largest finite f16
      [65519, 0x7bff], // just below the rounding boundary to Inf
      [65520, 0x7c00], // rounds to +Inf
      [2 ** -14, 0x0400], // smallest normal (6.1035e-5)
      [6.1e-5, 0x03ff], // just below it: largest subnormal is nearer
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // tie between 0 and 2^-24: rounds to even (0)
      [1.5 * 2 ** -25, 0x0001],
      [1 + 2 ** -11, 0x3c00], // tie: round to even mantissa
      [1 + 3 * 2 ** -11, 0x3c02], // tie: round to even (up)
      [Number.POSITIVE_INFINITY, 0x7c00],
      [Number.NEGATIVE_INFINITY, 0xfc00]
    ]
    for (const [value, bits] of cases) expect(f32ToF16(value), `f16(${value})`).toBe(bits)
    expect(f32ToF16(Number.NaN) & 0x7c00).toBe(0x7c00)
    expect(f32ToF16(Number.NaN) & 0x3ff).not.toBe(0)
  })

  it('decodes exactly and round-trips every finite f16', () => {
    expect(f16ToF32(0x3c00)).toBe(1)
    expect(f16ToF32(0x7bff)).toBe(65504)
    expect(f16ToF32(0x0001)).toBe(2 ** -24)
    expect(Object.is(f16ToF32(0x8000), -0)).toBe(true)
    const mismatches: number[] = []
    for (let h = 0; h < 65536; h++) {
      if ((h & 0x7c00) !== 0x7c00 && f32ToF16(f16ToF32(h)) !== h) mismatches.push(h)
    }
    expect(mismatches).toEqual([])
  })
})

describe('encodeTensor / decodeTensor', () => {
  it('f32 round-trips bit-exactly, little-endian', () => {
    const values = random(64 * 7, 1, 100)
    values[0] = -0
    values[1] = 1.401298464324817e-45 // smallest f32 subnormal
    values[2] = 3.4028234663852886e38
    const t = encodeTensor(values, [7, 64], 'f32')
    expect(t.data.byteLength).toBe(7 * 64 * 4)
    expect(new DataView(t.data.buffer).getFloat32(8, true)).toBe(values[2])
    const back = decodeTensor(t, { shape: [undefined, 64] })
    expect(new Uint32Array(back.buffer)).toEqual(new Uint32Array(values.buffer))
  })

  it('f16 round trip error is within half an ulp (relative 2^-11)', () => {
    const values = random(4096, 2, 1000)
    const back = decodeTensor(encodeTensor(values, [4, 1024], 'f16'))
    for (let i = 0; i < values.length; i++) {
      const v = values[i]
      // normal range: relative error <= 2^-11; subnormal range: absolute error <= 2^-25
      expect(Math.abs(back[i] - v)).toBeLessThanOrEqual(Math.max(Math.abs(v) * 2 ** -11, 2 ** -25))
    }
  })

  it('q8_0 matches a scalar transcription of ggml quantize_row_q8_0_ref', () => {
    const row = 70 // 3 blocks, the last one padded
    const values = random(row * 3, 3, 5)
    const t = encodeTensor(values, [3, row], 'q8_0')
    expect(t.data.byteLength).toBe(3 * 3 * Q8_0_BLOCK_BYTES)
    const dv = new DataView(t.data.buffer)
    for (let r = 0; r < 3; r++) {
      for (let b = 0; b < 3; b++) {
        const off = (r * 3 + b) * 34
        const xs = Array.from(values.subarray(r * row + b * 32, r * row + Math.min(row, b * 32 + 32)))
        const amax = Math.max(...xs.map(Math.abs))
        const d = Math.fround(amax / 127)
        const id = Math.fround(1 / d)
        expect(dv.getUint16(off, true)).toBe(f32ToF16(d))
        xs.forEach((x, i) => {
          const p = Math.fround(x * id)
          expect(dv.getInt8(off + 2 + i)).toBe(Math.sign(p) * Math.floor(Math.abs(p) + 0.5))
        })
        for (let i = xs.length; i < 32; i++) expect(dv.getInt8(off + 2 + i)).toBe(0) // padding
      }
    }
    // decode: x = f16(d) * q; error per value <= d/2 (+ f16 rounding of d)
    const back = decodeTensor(t)
    for (let r = 0; r < 3; r++) {
      for (let b = 0; b < 3; b++) {
        const d = f16ToF32(dv.getUint16((r * 3 + b) * 34, true))
        for (let i = r * row + b * 32; i < r * row + Math.min(row, b * 32 + 32); i++) {
          expect(Math.abs(back[i] - values[i])).toBeLessThanOrEqual(d * 0.5 + Math.abs(values[i]) * 2 ** -10)
        }
      }
    }
  })

  it('q8_0 known answer: the block max maps to ±127, zeros stay zero, halves round away', () => {
    const values = new Float32Array(32)
    values[0] = 1.27
    values[1] = -1.27
    values[2] = 0.005 // 0.5 * d: a tie, rounds away from zero
    const t = encodeTensor(values, [1, 32], 'q8_0')
    const q = new Int8Array(t.data.buffer, 2, 32)
    expect([q[0], q[1], q[3]]).toEqual([127, -127, 0])
    expect(Math.abs(q[2])).toBe(1)
    const zeros = encodeTensor(new Float32Array(32), [1, 32], 'q8_0')
    expect(Array.from(zeros.data)).toEqual(new Array(34).fill(0))
    expect(Array.from(decodeTensor(zeros))).toEqual(new Array(32).fill(0))
  })

  it('decodes into a caller buffer', () => {
    const out = new Float32Array(256)
    const got = decodeTensor(encodeTensor(random(128, 4), [2, 64], 'f32'), { out })
    expect(got.buffer).toBe(out.buffer)
    expect(got.length).toBe(128)
  })

  it('rejects non-finite activations on encode and decode', () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const v = new Float32Array(4)
      v[2] = bad
      for (const dtype of ['f32', 'f16', 'q8_0'] as const) {
        expect(() => encodeTensor(v, [1, 4], dtype)).toThrow(NonFiniteTensorError)
      }
    }
    expect(() => encodeTensor(Float32Array.of(70000), [1], 'f16')).toThrow(NonFiniteTensorError)
    const nan = { shape: [2], dtype: 'f32' as const, data: new Uint8Array(new Float32Array([1, Number.NaN]).buffer) }
    expect(() => decodeTensor(nan)).toThrow(NonFiniteTensorError)
    expect(() => decodeTensor({ shape: [1], dtype: 'f16', data: Uint8Array.of(0x00, 0x7c) })).toThrow(NonFiniteTensorError)
    const q = new Uint8Array(34)
    q[1] = 0x7e // scale = NaN
    expect(() => decodeTensor({ shape: [32], dtype: 'q8_0', data: q })).toThrow(NonFiniteTensorError)
    expect(new NonFiniteTensorError('x').code).toBe('MALFORMED')
  })

  it('validates shapes and data lengths', () => {
    expect(tensorByteLength([3, 33], 'q8_0')).toBe(3 * 2 * 34)
    expect(() => encodeTensor(new Float32Array(6), [2, 4], 'f32')).toThrow(BadShapeError)
    expect(() => encodeTensor(new Float32Array(0), [0], 'f32')).toThrow(BadShapeError)
    expect(() => tensorByteLength([], 'f32')).toThrow(BadShapeError)
    expect(() => tensorByteLength([1, 1, 1, 1, 1], 'f32')).toThrow(BadShapeError)
    expect(() => tensorByteLength([65536, 65536], 'f32')).toThrow(MessageTooLargeError)
    expect(() => tensorByteLength([4294967295, 4294967295, 4294967295], 'f32')).toThrow(MessageTooLargeError)
    const short = { shape: [2, 4], dtype: 'f32' as const, data: new Uint8Array(31) }
    expect(() => decodeTensor(short)).toThrow(MalformedMessageError)
    const t = encodeTensor(new Float32Array(8), [2, 4], 'f16')
    expect(() => decodeTensor(t, { shape: [undefined, 8] })).toThrow(BadShapeError)
    expect(() => decodeTensor(t, { shape: [2] })).toThrow(BadShapeError)
  })
})
