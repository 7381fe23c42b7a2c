import { afterAll, describe, expect, it } from 'vitest'
import {
  createFastKernels,
  createReferenceKernels,
  createShard,
  dequantizeRow,
  type Kernels,
  type KvLayer,
  openModelFile,
  quantizeMatrix,
  type WeightDType,
  type WeightMatrix
} from '../../shards/index.js'
import { matmulExact, quantizeActivationsQ8 } from '../../shards/kernels/kernels-ref-exact.js'
import { quantizeActivationsQ8K } from '../../shards/kernels/kernels-ref-exact-quant.js'
import { loadNativeAddon, nativeIsaAddonPaths } from '../../shards/native/load.js'
import { QUANT_LAYOUTS, type QuantDType } from '../../shards/quant/quant-blocks.js'
import { randomBlockMatrix } from '../helpers/random-blocks.js'
import { GGUF_PATH } from '../helpers/reference.js'

/*
 * The contract every `Kernels` implementation keeps (shards/kernels/kernels.ts), run against each of them:
 * matmul within the stated tolerance of the reference (f32/f16 weights: f32 summation error; q8_0:
 * plus the activation quantization llama.cpp does), rmsnorm/rope/swiglu identical to the
 * reference, attention within 1e-5·max|v| over f32 and f16 KV, batch rows independent of the
 * batch (row t of T equals a T = 1 call, bit for bit), and a model's span giving the same bits
 * batched and token by token. Block types (Q4_0 … Q6_K, BF16): a fast kernel equals its exact
 * TypeScript twin (kernels-ref-exact-quant.ts) bit for bit, and the twin stays within the
 * activation quantisation error of the reference (blockBound). A new kernel set is added to IMPLEMENTATIONS and must pass as is.
 */

const made: Kernels[] = []
function keep(k: Kernels): Kernels {
  made.push(k)
  return k
}
afterAll(() => {
  for (const k of made) k.close?.()
})

const IMPLEMENTATIONS: ReadonlyArray<[string, () => Kernels]> = [
  ['reference', () => createReferenceKernels()],
  ['wasm, 1 thread', () => keep(createFastKernels({ threads: 1, native: false }))],
  ['wasm, 2 threads', () => keep(createFastKernels({ threads: 2, native: false }))],
  // the native addon when it is built (npm run build:native), else WebAssembly again
  ['fast with native, 2 threads', () => keep(createFastKernels({ threads: 2 }))],
  // Issue 40: each forced instruction-set level built here (build.mjs LAYERSWARM_NATIVE_ISAS, all
  // of them in CI) that this CPU runs, so a machine with AVX-512 still tests the AVX2 and generic code.
  ...nativeIsaAddonPaths()
    .filter(({ path }) => loadNativeAddon(path) !== null)
    .map(({ isa, path }): [string, () => Kernels] => [
      `native forced to ${isa}, 2 threads`,
      () => keep(createFastKernels({ threads: 2, nativePath: path }))
    ])
]

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
const randn = (n: number, seed: number, scale = 1): Float32Array => {
  const r = rng(seed)
  return Float32Array.from({ length: n }, () => (r() * 2 - 1) * scale)
}
const weight = (dtype: WeightDType, rows: number, cols: number, seed: number): WeightMatrix =>
  quantizeMatrix(randn(rows * cols, seed, 0.5), rows, cols, dtype)

const ref = createReferenceKernels()

function matmul(k: Kernels, w: WeightMatrix, x: Float32Array, T: number): Float32Array {
  const out = new Float32Array(T * w.rows)
  k.matmul(out, x, k.prepare(w), T)
  return out
}

/** Per output: the tolerance against the reference for this weight dtype (see the header). */
function matmulBound(dtype: WeightDType, w: WeightMatrix, x: Float32Array, T: number): Float32Array {
  const dense = new Float32Array(w.rows * w.cols)
  for (let r = 0; r < w.rows; r++) dequantizeRow(w, r, dense.subarray(r * w.cols, (r + 1) * w.cols))
  const bound = new Float32Array(T * w.rows)
  for (let t = 0; t < T; t++) {
    const xt = x.subarray(t * w.cols, (t + 1) * w.cols)
    for (let r = 0; r < w.rows; r++) {
      let s = 0
      let q = 0
      for (let c = 0; c < w.cols; c++) {
        const a = Math.abs(dense[r * w.cols + c])
        s += a * Math.abs(xt[c])
        if (dtype === 'q8_0') {
          // activations quantized to 8-bit blocks of 32 (scale amax/127, rounding half a step)
          let amax = 0
          const b0 = c - (c % 32)
          for (let j = b0; j < Math.min(w.cols, b0 + 32); j++) amax = Math.max(amax, Math.abs(xt[j]))
          q += a * (amax / 254 + Math.abs(xt[c]) * 2 ** -10)
        }
      }
      bound[t * w.rows + r] = (w.cols / 4 + 4) * 2 ** -24 * s + q
    }
  }
  return bound
}

/**
 * Per output, the block types' tolerance against the reference (stated in
 * kernels-ref-exact-quant.ts): Σ|w|·(dx/2 + |x|·2⁻¹⁰) for Q8_0 activations, Σ|w|·|dx|/2 for Q8_K,
 * plus the f32 summation term; BF16 (f32 activations) only the latter.
 */
function blockBound(w: WeightMatrix, x: Float32Array, T: number): Float32Array {
  const { cols, rows } = w
  const acts = QUANT_LAYOUTS[w.dtype as QuantDType].activations
  const q8 = acts === 'q8_0' ? quantizeActivationsQ8(x, cols, T) : null
  const q8k = acts === 'q8_k' ? quantizeActivationsQ8K(x, cols, T) : null
  const row = new Float32Array(cols)
  const bound = new Float32Array(T * rows)
  for (let r = 0; r < rows; r++) {
    dequantizeRow(w, r, row)
    for (let t = 0; t < T; t++) {
      let mag = 0
      let qerr = 0
      for (let c = 0; c < cols; c++) {
        const xv = x[t * cols + c]
        mag += Math.abs(row[c] * xv)
        if (q8) qerr += Math.abs(row[c]) * (q8.d[t * (cols / 32) + (c >> 5)] / 2 + Math.abs(xv) * 2 ** -10)
        if (q8k) qerr += Math.abs(row[c]) * (Math.abs(q8k.d[t * (cols / 256) + (c >> 8)]) / 2) * 1.001
      }
      bound[t * rows + r] = (cols / 4 + 4) * 2 ** -24 * mag + qerr + 1e-30
    }
  }
  return bound
}

describe.each(IMPLEMENTATIONS)('Kernels compliance: %s', (name, make) => {
  const k = make()

  it.each(Object.keys(QUANT_LAYOUTS) as QuantDType[])(
    'matmul %s: equals its exact twin (fast kernels), within tolerance of the reference; batch rows = single rows',
    (dtype) => {
      const unit = QUANT_LAYOUTS[dtype].blockElems === 256 ? 256 : 32
      const rows = 11
      const cols = unit * 3
      const w = randomBlockMatrix(dtype, rows, cols, rows * 17 + cols)
      for (const T of [1, 3, 9]) {
        const x = randn(T * cols, T + cols)
        const got = matmul(k, w, x, T)
        if (name !== 'reference') {
          const exact = new Float32Array(T * rows)
          matmulExact(exact, x, w, T)
          expect(got).toEqual(exact)
        }
        const want = matmul(ref, w, x, T)
        const bound = blockBound(w, x, T)
        for (let i = 0; i < got.length; i++) expect(Math.abs(got[i] - want[i]), `T=${T} i=${i}`).toBeLessThanOrEqual(bound[i])
        for (let t = 0; t < T; t++)
          expect(got.subarray(t * rows, (t + 1) * rows)).toEqual(matmul(k, w, x.slice(t * cols, (t + 1) * cols), 1))
      }
    }
  )

  it.each([
    ['f32', 5, 13],
    ['f16', 7, 33],
    ['q8_0', 6, 64]
  ] as Array<[WeightDType, number, number]>)(
    'matmul %s [%i × %i]: within tolerance of the reference; batch rows = single rows, bit for bit',
    (dtype, rows, cols) => {
      const w = weight(dtype, rows, cols, rows * 31 + cols)
      for (const T of [1, 3, 9]) {
        const x = randn(T * cols, T + cols)
        const got = matmul(k, w, x, T)
        const want = matmul(ref, w, x, T)
        const bound = matmulBound(dtype, w, x, T)
        for (let i = 0; i < got.length; i++) expect(Math.abs(got[i] - want[i]), `T=${T} i=${i}`).toBeLessThanOrEqual(bound[i])
        for (let t = 0; t < T; t++) {
          const single = matmul(k, w, x.slice(t * cols, (t + 1) * cols), 1)
          expect(got.subarray(t * rows, (t + 1) * rows)).toEqual(single)
        }
      }
    }
  )

  it('rmsnorm, rope and swiglu are identical to the reference', () => {
    const T = 3
    const n = 64
    const x = randn(T * n, 1)
    const norm = randn(n, 2)
    const a = new Float32Array(T * n)
    const b = new Float32Array(T * n)
    k.rmsnorm(a, x, norm, T, 1e-5)
    ref.rmsnorm(b, x, norm, T, 1e-5)
    expect(a).toEqual(b)
    const q1 = randn(T * n, 3)
    const q2 = q1.slice()
    k.rope(q1, T, 4, 16, 5, 10000)
    ref.rope(q2, T, 4, 16, 5, 10000)
    expect(q1).toEqual(q2)
    const g1 = randn(T * n, 4)
    const g2 = g1.slice()
    const up = randn(T * n, 5)
    k.swiglu(g1, up, T * n)
    ref.swiglu(g2, up, T * n)
    expect(g1).toEqual(g2)
  })

  it.each(['f32', 'f16'] as const)('attention over an %s KV cache is within 1e-5·max|v| of the reference', (dtype) => {
    const shape = { T: 3, startPos: 4, nHeads: 4, nKvHeads: 2, headDim: 16 }
    const kvDim = shape.nKvHeads * shape.headDim
    const maxLength = 16
    const keys = randn(maxLength * kvDim, 6)
    const values = randn(maxLength * kvDim, 7)
    const toKv = (): KvLayer =>
      dtype === 'f32'
        ? { dtype, keys: keys.slice(), values: values.slice() }
        : { dtype, keys: f16Bits(keys), values: f16Bits(values) }
    const q = randn(shape.T * shape.nHeads * shape.headDim, 8)
    const got = new Float32Array(q.length)
    const want = new Float32Array(q.length)
    k.attention(got, q, toKv(), shape)
    ref.attention(want, q, toKv(), shape)
    const vmax = values.reduce((m, v) => Math.max(m, Math.abs(v)), 0)
    for (let i = 0; i < got.length; i++) expect(Math.abs(got[i] - want[i])).toBeLessThanOrEqual(1e-5 * vmax)
  })

  it('a span of the bundled model gives the same bits batched and token by token (whatever blockForward/spanForward it has)', () => {
    const model = openModelFile(GGUF_PATH)
    try {
      const a = createShard({ model, start: 0, end: 3, kernels: k })
      const b = createShard({ model, start: 0, end: 3, kernels: k })
      const dim = model.config.dim
      const rows = 10
      const x = randn(rows * dim, 9)
      a.openSession('batched', { maxLength: 32 })
      b.openSession('steps', { maxLength: 32 })
      const batched = a.forward('batched', x.slice(), 0)
      const steps = new Float32Array(rows * dim)
      for (let t = 0; t < rows; t++) steps.set(b.forward('steps', x.slice(t * dim, (t + 1) * dim), t), t * dim)
      expect(batched).toEqual(steps)
    } finally {
      model.close()
    }
  })
})

/** f16 bit patterns of f32 values (round to nearest even), as an f16 KV layer stores them. */
function f16Bits(values: Float32Array): Uint16Array {
  const w = quantizeMatrix(values, 1, values.length, 'f16')
  return new Uint16Array(w.data.buffer.slice(w.data.byteOffset, w.data.byteOffset + w.data.byteLength))
}
