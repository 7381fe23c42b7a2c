import { afterAll, describe, expect, it } from 'vitest'
import { createFastKernels, type FastKernels } from '../../shards/kernels/kernels-fast.js'
import { createReferenceKernels } from '../../shards/kernels/kernels-ref.js'
import { matmulExact, quantizeActivationsQ8 } from '../../shards/kernels/kernels-ref-exact.js'
import { quantizeActivationsQ8K } from '../../shards/kernels/kernels-ref-exact-quant.js'
import { loadNativeAddon, nativeIsaAddonPaths } from '../../shards/native/load.js'
import { dequantizeRow } from '../../shards/quant/codecs.js'
import { QUANT_LAYOUTS, type QuantDType } from '../../shards/quant/quant-blocks.js'
import type { WeightMatrix } from '../../shards/types.js'
import { randomBlockMatrix as randomMatrix, rng } from '../helpers/random-blocks.js'

// The block-type kernels (shards/native/quant-dot.cc, and the WebAssembly SIMD ones of
// shards/asm/matmul-quant.ts) against their exact TypeScript definition
// (shards/kernels/kernels-ref-exact-quant.ts) bit for bit, for 1 and 2 threads, decode (T < 8) and
// batched (T >= 8) shapes; and the definition against the float64 reference on the dequantised
// weights, within the activation quantisation error (stated in shards/kernels/kernels-ref-exact-quant.ts):
//   |Δ| <= Σ_k |w_k| · (dx_b/2 + |x_k|·2⁻¹⁰) + (cols/4 + 4)·2⁻²⁴·Σ|w·x|   (dx_b the block's Q8 scale)
// BF16 multiplies f32 activations: only the f32 rounding term.

function randn(n: number, rand: () => number, scale = 1): Float32Array {
  const a = new Float32Array(n)
  for (let i = 0; i < n; i++) a[i] = (rand() * 2 - 1) * scale
  return a
}

const addon = loadNativeAddon()
const kernels: FastKernels[] = []
function fast(threads: number, native?: false, nativePath?: string): FastKernels {
  const k = createFastKernels({ threads, native, nativePath })
  kernels.push(k)
  return k
}
afterAll(() => {
  for (const k of kernels) k.close?.()
})
const one = fast(1)
const two = fast(2)
const wasmOne = fast(1, false)
const wasmTwo = fast(2, false)
const ref = createReferenceKernels()
// Issue 40: each forced instruction-set level built here (generic, AVX2, AVX-512; all in CI) that
// this CPU runs, 1 and 2 threads, so the AVX2 kernels are tested on an AVX-512 machine too.
const forced = nativeIsaAddonPaths()
  .filter(({ path }) => loadNativeAddon(path) !== null)
  .map(({ isa, path }) => ({ isa, one: fast(1, undefined, path), two: fast(2, undefined, path) }))

function run(k: FastKernels, w: WeightMatrix, x: Float32Array, T: number): Float32Array {
  const out = new Float32Array(T * w.rows)
  k.matmul(out, x, k.prepare(w), T)
  return out
}

describe('block-type matmul', () => {
  it('the native addon has the block-type kernels where it builds (x86-64 with AVX2)', () => {
    if (addon && addon.isa !== 'generic') expect(addon.quantTypes).toBe(true)
  })

  const types = Object.keys(QUANT_LAYOUTS) as QuantDType[]
  for (const dtype of types) {
    const unit = QUANT_LAYOUTS[dtype].blockElems === 256 ? 256 : 32
    const shapes: Array<[number, number]> = [
      [1, unit],
      [13, unit * 3],
      [37, unit * 9 + (dtype === 'bf16' ? 3 : 0)]
    ]
    for (const [rows, cols] of shapes) {
      for (const T of [1, 3, 9, 17]) {
        it(`${dtype} ${rows}x${cols} T=${T}: exact vs TS definition, 1 = 2 threads, within tolerance of the reference`, () => {
          const w = randomMatrix(dtype, rows, cols, rows * 7919 + cols + T)
          const x = randn(T * cols, rng(T * 31 + cols), 2)
          const exact = new Float32Array(T * rows)
          matmulExact(exact, x, w, T)
          expect(run(one, w, x, T)).toEqual(exact)
          expect(run(two, w, x, T)).toEqual(exact)
          expect(run(wasmOne, w, x, T)).toEqual(exact)
          expect(run(wasmTwo, w, x, T)).toEqual(exact)
          for (const f of forced) {
            expect(run(f.one, w, x, T), `${f.isa}, 1 thread`).toEqual(exact)
            expect(run(f.two, w, x, T), `${f.isa}, 2 threads`).toEqual(exact)
          }
          const expected = new Float32Array(T * rows)
          ref.matmul(expected, x, w, T)
          const acts = QUANT_LAYOUTS[dtype].activations
          const q8 = acts === 'q8_0' ? quantizeActivationsQ8(x, cols, T) : null
          const q8k = acts === 'q8_k' ? quantizeActivationsQ8K(x, cols, T) : null
          const row = new Float32Array(cols)
          for (let r = 0; r < rows; r++) {
            dequantizeRow(w, r, row)
            for (let t = 0; t < T; t++) {
              let mag = 0
              let qerr = 0
              for (let k = 0; k < cols; k++) {
                const xv = x[t * cols + k]
                mag += Math.abs(row[k] * xv)
                if (q8) qerr += Math.abs(row[k]) * (q8.d[t * (cols / 32) + (k >> 5)] / 2 + Math.abs(xv) * 2 ** -10)
                if (q8k) qerr += Math.abs(row[k]) * (Math.abs(q8k.d[t * (cols / 256) + (k >> 8)]) / 2) * 1.001
              }
              const tol = (cols / 4 + 4) * 2 ** -24 * mag + qerr + 1e-30
              expect(Math.abs(exact[t * rows + r] - expected[t * rows + r])).toBeLessThanOrEqual(tol)
            }
          }
        })
      }
    }
  }

  it('batched rows equal T = 1 rows bit for bit (native and WebAssembly)', () => {
    for (const k of [two, wasmTwo, ...forced.map((f) => f.two)]) {
      for (const dtype of ['q4_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'bf16'] as const) {
        const cols = 512
        const w = randomMatrix(dtype, 21, cols, 5)
        const T = 12
        const x = randn(T * cols, rng(3))
        const batched = run(k, w, x, T)
        for (let t = 0; t < T; t++)
          expect(run(k, w, x.subarray(t * cols, (t + 1) * cols), 1)).toEqual(batched.subarray(t * 21, (t + 1) * 21))
      }
    }
  })
})

describe('placement: a span on slow kernels says so', () => {
  it('block types in the WebAssembly heap run on its kernels (nothing slow); with the addon, none either', () => {
    const wasmOnly = createFastKernels({ threads: 1, native: false })
    kernels.push(wasmOnly)
    const w = randomMatrix('q4_k', 8, 256, 1)
    const x = randn(256, rng(2))
    const out = new Float32Array(8)
    wasmOnly.matmul(out, x, wasmOnly.prepare(w), 1)
    const exact = new Float32Array(8)
    matmulExact(exact, x, w, 1)
    expect(out).toEqual(exact)
    expect(wasmOnly.placement?.()).toMatchObject({
      weightBytes: w.data.byteLength,
      slowWeightBytes: 0,
      reasons: [],
      kvMemory: 'heap'
    })
    if (addon?.quantTypes) {
      const k = fast(1)
      k.prepare(w)
      expect(k.placement?.()).toMatchObject({
        weightBytes: w.data.byteLength,
        nativeBufferBytes: 0,
        slowWeightBytes: 0,
        reasons: [],
        kvMemory: 'native'
      })
    }
  })
})
