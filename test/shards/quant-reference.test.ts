import { describe, expect, it } from 'vitest'
import { dequantizeBlocks, dequantizeRow, ggmlTypeOf, quantizeMatrix } from '../../shards/quant/index.js'
import { dequantizeQuantRow, QUANT_LAYOUTS, type QuantDType } from '../../shards/quant/quant-blocks.js'
import type { WeightDType } from '../../shards/types.js'

// Known answers: each block is built byte by byte, and the expected values are worked out by
// hand from the format's definition (comments show the arithmetic). f16 constants:
// 0x3000 = 0.125, 0x3400 = 0.25, 0x3800 = 0.5, 0x3C00 = 1, 0x4000 = 2, 0xBC00 = −1.

function block(dtype: WeightDType, fill: (b: Uint8Array) => void): Uint8Array {
  const b = new Uint8Array(ggmlTypeOf(dtype).blockBytes)
  fill(b)
  return b
}

function decode(dtype: WeightDType, b: Uint8Array): Float32Array {
  const n = ggmlTypeOf(dtype).blockElems
  const out = new Float32Array(n)
  dequantizeBlocks(dtype, b, 0, n, out, 0)
  return out
}

const half = (b: Uint8Array, at: number, h: number): void => {
  b[at] = h & 0xff
  b[at + 1] = h >> 8
}

describe('reference dequantisers: hand-made blocks', () => {
  it('Q4_0: x = d·(q − 8)', () => {
    const b = block('q4_0', (b) => {
      half(b, 0, 0x3800) // d = 0.5
      b.fill(0x88, 2) // q = 8 everywhere → 0
      b[2] = 0x1f // element 0: low 15 → (15−8)·0.5 = 3.5; element 16: high 1 → (1−8)·0.5 = −3.5
      b[3] = 0x80 // element 1: low 0 → −4; element 17: high 8 → 0
    })
    const y = decode('q4_0', b)
    expect([y[0], y[16], y[1], y[17], y[2], y[31]]).toEqual([3.5, -3.5, -4, 0, 0, 0])
  })

  it('Q4_1: x = d·q + m', () => {
    const b = block('q4_1', (b) => {
      half(b, 0, 0x3400) // d = 0.25
      half(b, 2, 0xbc00) // m = −1
      b[4] = 0xf0 // element 0: 0·0.25 − 1 = −1; element 16: 15·0.25 − 1 = 2.75
      b[5] = 0x04 // element 1: 4·0.25 − 1 = 0
    })
    const y = decode('q4_1', b)
    expect([y[0], y[16], y[1], y[17]]).toEqual([-1, 2.75, 0, -1])
  })

  it('Q5_0: fifth bit from qh, x = d·(q − 16)', () => {
    const b = block('q5_0', (b) => {
      half(b, 0, 0x3c00) // d = 1
      b[2] = 0x01 // qh bit 0
      b[4] = 0x01 // qh bit 16
      b[6] = 0x0f // element 0: 15 | 16 = 31 → 15; element 16: 0 | 16 = 16 → 0
    })
    const y = decode('q5_0', b)
    expect([y[0], y[16], y[1], y[31]]).toEqual([15, 0, -16, -16]) // the rest: 0 → −16
  })

  it('Q5_1: fifth bit from qh, x = d·q + m', () => {
    const b = block('q5_1', (b) => {
      half(b, 0, 0x3800) // d = 0.5
      half(b, 2, 0x4000) // m = 2
      b[7] = 0x80 // qh bit 31: element 31's fifth bit
      b[8 + 15] = 0x30 // element 15: 0 → 2; element 31: 3 | 16 = 19 → 9.5 + 2 = 11.5
    })
    const y = decode('q5_1', b)
    expect([y[15], y[31], y[0]]).toEqual([2, 11.5, 2])
  })

  it('Q8_0: x = d·q, q signed', () => {
    const b = block('q8_0', (b) => {
      half(b, 0, 0x3000) // d = 0.125
      b[2] = 0x80 // −128 · 0.125 = −16
      b[33] = 0x7f // 127 · 0.125 = 15.875
    })
    const y = decode('q8_0', b)
    expect([y[0], y[31], y[1]]).toEqual([-16, 15.875, 0])
  })

  it('Q2_K: 16 (scale, min) nibbles, 2-bit quants', () => {
    const b = block('q2_k', (b) => {
      b.fill(0x32, 0, 16) // every sub-block: scale 2, min 3 → dl = 1·2 = 2, ml = 0.5·3 = 1.5
      b[15] = 0x0f // sub-block 15: scale 15, min 0
      b[16] = 0b11_10_01_00 // qs[0]: elements 0, 32, 64, 96 get q = 0, 1, 2, 3
      b[16 + 63] = 0xc0 // qs[63] bits 6-7: element 255 (half 1, j = 3, l = 31) gets q = 3
      half(b, 80, 0x3c00) // d = 1
      half(b, 82, 0x3800) // dmin = 0.5
    })
    const y = decode('q2_k', b)
    // 2·0 − 1.5, 2·1 − 1.5, 2·2 − 1.5, 2·3 − 1.5, element 1 (q 0), element 255: 15·3 − 0
    expect([y[0], y[32], y[64], y[96], y[1], y[255]]).toEqual([-1.5, 0.5, 2.5, 4.5, -1.5, 45])
  })

  it('Q3_K: 6-bit signed scales, high bit from hmask', () => {
    const b = block('q3_k', (b) => {
      // scales: every code 32 (scale 0) is low nibble 0 and top bits 0b10 → bytes 104..107 = 0xAA
      b.fill(0xaa, 104, 108)
      b[96] = 0x03 // scale 0: code 0b10_0011 = 35 → 3
      b[104] = 0x8a // scale 8: top bits (bits 4-5 of byte 104) 0 and low nibble 0 → code 0 → −32
      b[103] = 0xf0 // scale 15: low nibble (high nibble of byte 103) 15
      b[107] = 0xea // scale 15: top bits (bits 6-7 of byte 107) 3 → code 63 → 31
      b[32] = 0x03 // element 0: low bits 3; hmask[0] bit 0 set → q = 3
      b[0] = 0x01
      b[32 + 32] = 0x01 // element 128 (half 1, j 0, l 0): low bits 1, hmask[0] bit 4 clear → 1 − 4 = −3
      b[32 + 63] = 0xc0 // element 255: low bits 3, hmask[31] bit 7 set → q = 3
      b[31] = 0x80
      half(b, 108, 0x3800) // d = 0.5
    })
    const y = decode('q3_k', b)
    // (0.5·3)·3 = 4.5; element 1: (0.5·3)·(0 − 4) = −6; (0.5·−32)·−3 = 48; (0.5·31)·3 = 46.5;
    // element 16 (scale 1 = code 32 → 0): 0·(0 − 4) = −0, as in C
    expect([y[0], y[1], y[128], y[255], y[16]]).toEqual([4.5, -6, 48, 46.5, -0])
  })

  it('Q4_K: 6-bit (scale, min) pairs packed in 12 bytes', () => {
    const b = block('q4_k', (b) => {
      half(b, 0, 0x3800) // d = 0.5
      half(b, 2, 0x3400) // dmin = 0.25
      b[4 + 0] = 10 // pair 0 scale 10
      b[4 + 4] = 4 // pair 0 min 4 → d1 = 5, m1 = 1
      // pair 7: scale 50 = 0b11_0010, min 33 = 0b10_0001
      b[4 + 11] = 0x12 // low nibbles: scale 2, min 1
      b[4 + 3] = 0xc0 // scale's top bits in byte 3's bits 6-7
      b[4 + 7] = 0x80 // min's top bits in byte 7's bits 6-7 → d1 = 25, m1 = 8.25
      b[16 + 0] = 0x07 // element 0: low nibble 7
      b[16 + 96] = 0x30 // element 224 (chunk 3, second half, l 0): high nibble 3
    })
    const y = decode('q4_k', b)
    // 5·7 − 1 = 34; element 1: 5·0 − 1 = −1; 25·3 − 8.25 = 66.75; element 255: −8.25; sub 1: 0
    expect([y[0], y[1], y[224], y[255], y[32]]).toEqual([34, -1, 66.75, -8.25, 0])
  })

  it('Q5_K: as Q4_K with a fifth bit from qh', () => {
    const b = block('q5_k', (b) => {
      half(b, 0, 0x3800)
      half(b, 2, 0x3400)
      b[4] = 10
      b[8] = 4
      b[15] = 0x12
      b[7] = 0xc0
      b[11] = 0x80
      b[16 + 0] = 0x81 // qh[0]: bit 0 (element 0) and bit 7 (element 224)
      b[48 + 0] = 0x07
      b[48 + 96] = 0x30
    })
    const y = decode('q5_k', b)
    // 5·(7 + 16) − 1 = 114; 25·(3 + 16) − 8.25 = 466.75; element 1: −1
    expect([y[0], y[224], y[1]]).toEqual([114, 466.75, -1])
  })

  it('Q6_K: 4 low bits in ql, 2 high in qh, int8 scales', () => {
    const b = block('q6_k', (b) => {
      b[0] = 0x0a // element 0 low nibble 10
      b[128] = 0x02 // element 0 high bits (qh[0] bits 0-1) 2 → q = 10 + 32 = 42 → 10
      b[127] = 0xf0 // element 255: ql[127] high nibble 15
      b[128 + 63] = 0xc0 // element 255: qh[63] bits 6-7 → q = 63 → 31
      b[192] = 0xfd // scale 0 = −3
      b[192 + 15] = 5 // scale 15 = 5
      half(b, 208, 0x4000) // d = 2
    })
    const y = decode('q6_k', b)
    // (2·−3)·10 = −60; element 1: (2·−3)·(0 − 32) = 192; (2·5)·31 = 310; element 64 (scale 4 = 0): 0·−32 = −0
    expect([y[0], y[1], y[255], y[64]]).toEqual([-60, 192, 310, -0])
  })

  it('BF16 and F16: bit patterns', () => {
    const b = new Uint8Array([0xc0, 0x3f, 0x49, 0xc0]) // 0x3FC0, 0xC049
    const y = new Float32Array(2)
    dequantizeBlocks('bf16', b, 0, 2, y, 0)
    expect([...y]).toEqual([1.5, -3.140625]) // 0x3FC00000 = 1.5, 0xC0490000 = −3.140625
    dequantizeBlocks('f16', new Uint8Array([0x00, 0x3c, 0x00, 0xc0]), 0, 2, y, 0)
    expect([...y]).toEqual([1, -2])
  })
})

function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 4294967296
  }
}

/** Roughly normal values (sum of 4 uniforms), some rows scaled up to vary block ranges. */
function values(n: number, seed: number): Float32Array {
  const r = rng(seed)
  return Float32Array.from({ length: n }, (_, i) => (r() + r() + r() + r() - 2) * (1 + (Math.floor(i / 256) % 3)))
}

describe('reference dequantisers against an independent decoder', () => {
  // shards/quant/quant-blocks.ts unpacks blocks into integers (written separately, for the fast
  // kernels) and combines them in float64; ggml's float32 steps may differ by a few ulps.
  for (const dtype of Object.keys(QUANT_LAYOUTS) as QuantDType[]) {
    it(`${dtype}: random blocks decode alike`, () => {
      const cols = 512
      const w = quantizeMatrix(values(cols * 4, 7), 4, cols, dtype)
      // Scramble the quant bits (keep the scales' bytes sane by quantising first) for coverage.
      const r = rng(3)
      for (let i = 0; i < w.data.length; i++) if (r() < 0.3) w.data[i] ^= 1 << Math.floor(r() * 4)
      const a = new Float32Array(cols)
      const b = new Float32Array(cols)
      for (let row = 0; row < 4; row++) {
        dequantizeRow(w, row, a)
        dequantizeQuantRow(dtype, w.data, cols, row, b)
        for (let i = 0; i < cols; i++) {
          if (!Number.isFinite(b[i])) continue
          expect(Math.abs(a[i] - b[i])).toBeLessThanOrEqual(Math.abs(b[i]) * 2 ** -21 + 1e-30)
        }
      }
    })
  }
})

describe('quantise → dequantise round trip', () => {
  // RMS error relative to the values' RMS, bounded per type (bits per weight in brackets);
  // the max error per element is at most about one quantisation step of its (sub-)block.
  const bounds: Record<string, number> = {
    f32: 0,
    f16: 0.0005,
    bf16: 0.004,
    q8_0: 0.006, // 8.5
    q6_k: 0.025, // 6.56
    q5_0: 0.045, // 5.5
    q5_1: 0.04, // 6
    q5_k: 0.045, // 5.5
    q4_0: 0.09, // 4.5
    q4_1: 0.08, // 5
    q4_k: 0.09, // 4.5
    q3_k: 0.2, // 3.44
    q2_k: 0.4 // 2.56
  }
  for (const [dtype, bound] of Object.entries(bounds) as Array<[WeightDType, number]>) {
    it(`${dtype}: relative RMS error ≤ ${bound}`, () => {
      const rows = 8
      const cols = 512
      const x = values(rows * cols, 11)
      const w = quantizeMatrix(x, rows, cols, dtype)
      const y = new Float32Array(cols)
      let err = 0
      let ref = 0
      for (let r = 0; r < rows; r++) {
        dequantizeRow(w, r, y)
        for (let c = 0; c < cols; c++) {
          err += (y[c] - x[r * cols + c]) ** 2
          ref += x[r * cols + c] ** 2
        }
      }
      const rel = Math.sqrt(err / ref)
      if (process.env.QUANT_PRINT) console.log(`${dtype} relative RMS error ${rel.toFixed(5)}`)
      expect(rel).toBeLessThanOrEqual(bound)
      if (dtype === 'f32') expect(rel).toBe(0)
    })
  }
  it('zero blocks stay zero', () => {
    for (const dtype of ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'q8_0', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'] as const) {
      const w = quantizeMatrix(new Float32Array(256), 1, 256, dtype)
      const y = new Float32Array(256).fill(1)
      dequantizeRow(w, 0, y)
      expect([...y].every((v) => v === 0)).toBe(true)
    }
  })
})
