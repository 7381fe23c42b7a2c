import { afterAll, describe, expect, it } from 'vitest'
import { f32ToF16 } from '../../shards/f16.js'
import type { KvLayer } from '../../shards/kernels/kernels.js'
import { createFastKernels, type FastKernels, selectKernels } from '../../shards/kernels/kernels-fast.js'
import { createReferenceKernels } from '../../shards/kernels/kernels-ref.js'
import { matmulExact, quantizeActivationsQ8 } from '../../shards/kernels/kernels-ref-exact.js'
import { dequantizeRow, quantizeMatrix } from '../../shards/quant/codecs.js'
import type { WeightDType, WeightMatrix } from '../../shards/types.js'

// Tolerances (stated in shards/kernels/kernels-fast.ts too):
// - f32/f16/q8_0 matmul: bit-identical to kernels-ref-exact.ts (the fast kernels' arithmetic in
//   plain TS), for any thread count and batch size.
// - f32/f16 matmul vs the float64 reference: |Δ| <= (cols/4 + 4) · 2⁻²⁴ · Σ|w·x| (f32 lanes).
// - q8_0 matmul vs the float64 reference on dequantized weights: |Δ| <= Σ_k |w_k| · (dx_b/2 +
//   |x_k|·2⁻¹⁰) + f32 rounding, i.e. activation quantization error only (as llama.cpp).
// - attention vs the reference: |Δ| <= 1e-5 · max|v| (f32 sums and a 2-ulp exp).
// - rmsnorm, rope, swiglu: identical to the reference.

function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function randn(n: number, rand: () => number, scale = 1): Float32Array {
  const a = new Float32Array(n)
  for (let i = 0; i < n; i++) a[i] = (rand() * 2 - 1) * scale
  return a
}

const kernels: FastKernels[] = []
function fast(threads: number): FastKernels {
  const k = createFastKernels({ threads, native: false })
  kernels.push(k)
  return k
}
afterAll(() => {
  for (const k of kernels) k.close?.()
})

const one = fast(1)
const two = fast(2)
// Native addon when built (npm run build:native): decode kernels for T < 8, batched for T >= 8; same bits.
const withNative = createFastKernels({ threads: 2 })
kernels.push(withNative)
const ref = createReferenceKernels()

function weight(dtype: WeightDType, rows: number, cols: number, seed: number): WeightMatrix {
  return quantizeMatrix(randn(rows * cols, rng(seed), 0.5), rows, cols, dtype)
}

function run(k: FastKernels, w: WeightMatrix, x: Float32Array, T: number): Float32Array {
  const out = new Float32Array(T * w.rows)
  k.matmul(out, x, k.prepare(w), T)
  return out
}

describe('fast matmul', () => {
  const shapes: Array<[WeightDType, number, number]> = [
    ['f32', 1, 1],
    ['f32', 3, 7],
    ['f32', 5, 13],
    ['f32', 17, 64],
    ['f32', 67, 130],
    ['f16', 1, 3],
    ['f16', 6, 9],
    ['f16', 19, 131],
    ['q8_0', 1, 32],
    ['q8_0', 7, 96],
    ['q8_0', 37, 160],
    ['q8_0', 66, 64]
  ]
  for (const [dtype, rows, cols] of shapes) {
    for (const T of [1, 2, 3, 7, 17, 128]) {
      it(`${dtype} ${rows}x${cols} T=${T}: exact vs TS definition, 1 = 2 threads, within tolerance of the reference`, () => {
        const w = weight(dtype, rows, cols, rows * 1000 + cols + T)
        const x = randn(T * cols, rng(T + cols), 2)
        const got1 = run(one, w, x, T)
        const got2 = run(two, w, x, T)
        const exact = new Float32Array(T * rows)
        matmulExact(exact, x, w, T)
        expect(got1).toEqual(exact)
        expect(got2).toEqual(exact)
        expect(run(withNative, w, x, T)).toEqual(exact)
        const expected = new Float32Array(T * rows)
        ref.matmul(expected, x, w, T)
        const row = new Float32Array(cols)
        const q = dtype === 'q8_0' ? quantizeActivationsQ8(x, cols, T) : null
        for (let r = 0; r < rows; r++) {
          dequantizeRow(w, r, row)
          for (let t = 0; t < T; t++) {
            let mag = 0
            let qerr = 0
            for (let k = 0; k < cols; k++) {
              const xv = x[t * cols + k]
              mag += Math.abs(row[k] * xv)
              if (q) qerr += Math.abs(row[k]) * (q.d[t * (cols / 32) + (k >> 5)] / 2 + Math.abs(xv) * 2 ** -10)
            }
            const tol = (cols / 4 + 4) * 2 ** -24 * mag + qerr + 1e-30
            expect(Math.abs(got1[t * rows + r] - expected[t * rows + r])).toBeLessThanOrEqual(tol)
          }
        }
      })
    }
  }

  it('batched rows equal T = 1 rows bit for bit', () => {
    for (const dtype of ['f32', 'f16', 'q8_0'] as const) {
      const w = weight(dtype, 45, 96, 7)
      const T = 17
      const x = randn(T * 96, rng(3))
      const batched = run(two, w, x, T)
      for (let t = 0; t < T; t++)
        expect(run(two, w, x.subarray(t * 96, (t + 1) * 96), 1)).toEqual(batched.subarray(t * 45, (t + 1) * 45))
    }
  })
})

function randomKv(dtype: 'f32' | 'f16', len: number, kvDim: number, seed: number, into?: KvLayer): KvLayer {
  const rand = rng(seed)
  const k = randn(len * kvDim, rand)
  const v = randn(len * kvDim, rand)
  const kv: KvLayer = into ?? {
    dtype,
    keys: dtype === 'f16' ? new Uint16Array(len * kvDim) : new Float32Array(len * kvDim),
    values: dtype === 'f16' ? new Uint16Array(len * kvDim) : new Float32Array(len * kvDim)
  }
  for (let i = 0; i < len * kvDim; i++) {
    kv.keys[i] = dtype === 'f16' ? f32ToF16(k[i]) : k[i]
    kv.values[i] = dtype === 'f16' ? f32ToF16(v[i]) : v[i]
  }
  return kv
}

describe('fast attention', () => {
  const cases = [
    { nHeads: 4, nKvHeads: 2, headDim: 8, startPos: 0, T: 1 },
    { nHeads: 3, nKvHeads: 3, headDim: 6, startPos: 5, T: 3 },
    { nHeads: 8, nKvHeads: 2, headDim: 64, startPos: 40, T: 17 },
    { nHeads: 2, nKvHeads: 1, headDim: 36, startPos: 0, T: 128 },
    { nHeads: 4, nKvHeads: 4, headDim: 33, startPos: 300, T: 1 }
  ]
  for (const dtype of ['f32', 'f16'] as const) {
    for (const shape of cases) {
      it(`${dtype} ${JSON.stringify(shape)}: reference within 1e-5 (|v| <= 1), 1 = 2 threads, batch = single rows`, () => {
        const { nHeads, nKvHeads, headDim, startPos, T } = shape
        const kvDim = nKvHeads * headDim
        const len = startPos + T
        const kv = randomKv(dtype, len, kvDim, len + headDim)
        const inWasm = randomKv(dtype, len, kvDim, len + headDim, two.allocKv(len + 5, kvDim, dtype))
        const q = randn(T * nHeads * headDim, rng(headDim), 2)
        const expected = new Float32Array(q.length)
        ref.attention(expected, q, kv, shape)
        const got1 = new Float32Array(q.length)
        one.attention(got1, q, kv, shape)
        const got2 = new Float32Array(q.length)
        two.attention(got2, q, inWasm, shape)
        two.freeKv(inWasm)
        expect(got2).toEqual(got1)
        // Values are drawn from [-1, 1], so max|v| <= 1.
        for (let i = 0; i < q.length; i++) expect(Math.abs(got1[i] - expected[i])).toBeLessThanOrEqual(1e-5)
        const width = nHeads * headDim
        for (const t of [0, T - 1]) {
          const row = new Float32Array(width)
          two.attention(row, q.subarray(t * width, (t + 1) * width), kv, { ...shape, T: 1, startPos: startPos + t })
          expect(row).toEqual(got1.subarray(t * width, (t + 1) * width))
        }
      })
    }
  }
})

describe('other fast kernels equal the reference', () => {
  it('rmsnorm, rope, swiglu', () => {
    const rand = rng(11)
    const x = randn(3 * 96, rand, 3)
    const weight = randn(96, rand)
    const a = new Float32Array(x.length)
    const b = new Float32Array(x.length)
    ref.rmsnorm(a, x, weight, 3, 1e-5)
    two.rmsnorm(b, x, weight, 3, 1e-5)
    expect(b).toEqual(a)
    const ra = x.slice()
    const rb = x.slice()
    ref.rope(ra, 3, 4, 24, 17, 10000)
    two.rope(rb, 3, 4, 24, 17, 10000)
    expect(rb).toEqual(ra)
    const ga = x.slice()
    const gb = x.slice()
    ref.swiglu(ga, weight, 96)
    two.swiglu(gb, weight, 96)
    expect(gb).toEqual(ga)
  })
})

describe('selectKernels', () => {
  it('falls back to WebAssembly when the native addon is unavailable, and honours explicit kinds', () => {
    const wasm = selectKernels({ threads: 2, nativePath: '/nonexistent/layerswarm_kernels.node' })
    expect(wasm.name).toBe('wasm-simd')
    wasm.close?.()
    expect(() => selectKernels({ kind: 'native', nativePath: '/nonexistent/addon.node' })).toThrow(/native kernel addon/)
    expect(selectKernels({ kind: 'reference' }).name).toBe('reference')
    const onlyWasm = selectKernels({ kind: 'wasm', threads: 1 })
    expect(onlyWasm.name).toBe('wasm-simd')
    onlyWasm.close?.()
    const auto = selectKernels({ threads: 1 })
    expect(auto.name).toMatch(/^wasm-simd/)
    auto.close?.()
  })

  it('a weight the kernels did not prepare is placed on first use', () => {
    const w = weight('q8_0', 9, 64, 5)
    const x = randn(64, rng(1))
    const a = new Float32Array(9)
    const b = new Float32Array(9)
    two.matmul(a, x, w, 1)
    matmulExact(b, x, w, 1)
    expect(a).toEqual(b)
  })
})
