import { afterAll, describe, expect, it } from 'vitest'
import {
  createEdge,
  createFastKernels,
  createRandomModel,
  createShard,
  type FastKernels,
  parseShape
} from '../../shards/index.js'
import { matmulExact } from '../../shards/kernels/kernels-ref-exact.js'
import { loadNativeAddon } from '../../shards/native/load.js'
import type { QuantDType } from '../../shards/quant/quant-blocks.js'
import type { WeightMatrix } from '../../shards/types.js'
import { randomBlockMatrix, rng, withBlockTypes } from '../helpers/random-blocks.js'

// The rows8 layout (shards/native/quant-layout.h): Q4_K/Q5_K/Q6_K matrices loaded through
// prepareInto are repacked in place so each 8-row tile streams as one run of memory. Blocks stay
// ggml blocks, so the kernels must give exactly the bits of the plain layout and of the exact
// TypeScript definition: decode (T < 8) and batched (T >= 8), 1 and 2 threads (2 threads cut
// shares at multiples of 4, so some start inside a tile), row counts that are not multiples of
// 8 (the rows past the last tile stay plain), and the fused block on a Q4_K_M mixture.

const addon = loadNativeAddon()
const canRepack = addon?.quantTypes === true && typeof addon.repackRows8 === 'function'
const open: FastKernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})
function fast(threads: number, native?: false): FastKernels {
  const k = createFastKernels({ threads, native })
  open.push(k)
  return k
}

function randn(n: number, seed: number): Float32Array {
  const rand = rng(seed)
  return Float32Array.from({ length: n }, () => (rand() * 2 - 1) * 2)
}

/** The matrix prepared through prepareInto (repacked unless keepRows), and its product. */
function product(k: FastKernels, w: WeightMatrix, x: Float32Array, T: number, keepRows: boolean) {
  const prepared = k.prepareInto?.({ dtype: w.dtype, rows: w.rows, cols: w.cols }, (d) => d.set(w.data), { keepRows })
  if (!prepared) throw new Error('fast kernels without prepareInto')
  const out = new Float32Array(T * w.rows)
  k.matmul(out, x, prepared, T)
  return { out, bytes: prepared.data }
}

describe.skipIf(!canRepack)('rows8 layout of K-quant matrices', () => {
  const one = fast(1)
  const two = fast(2)
  for (const dtype of ['q4_k', 'q5_k', 'q6_k'] as QuantDType[]) {
    for (const [rows, cols] of [
      [8, 256],
      [21, 512],
      [37, 768],
      [64, 256]
    ] as Array<[number, number]>) {
      for (const T of [1, 3, 9, 17]) {
        it(`${dtype} ${rows}x${cols} T=${T}: repacked = plain = exact definition, 1 and 2 threads`, () => {
          const w = randomBlockMatrix(dtype, rows, cols, rows * 131 + cols + T)
          const x = randn(T * cols, T * 7 + rows)
          const exact = new Float32Array(T * rows)
          matmulExact(exact, x, w, T)
          for (const k of [one, two]) {
            const packed = product(k, w, x, T, false)
            const plain = product(k, w, x, T, true)
            expect(plain.bytes).toEqual(w.data)
            // Two or more blocks per row: a full tile's bytes move; the rows past the tiles do not.
            if (cols > 256) expect(Buffer.from(packed.bytes).equals(Buffer.from(w.data))).toBe(false)
            const tail = Math.floor(rows / 8) * 8 * (w.data.length / rows)
            expect(packed.bytes.subarray(tail)).toEqual(w.data.subarray(tail))
            expect(packed.out).toEqual(exact)
            expect(plain.out).toEqual(exact)
          }
        })
      }
    }
  }

  it('repackRows8 leaves other types and partial blocks alone', () => {
    const repack = addon?.repackRows8 as NonNullable<typeof addon>['repackRows8'] & {}
    const q8 = new Uint8Array(34 * 8 * 8).fill(3)
    expect(repack(q8, 8, 8, 256)).toBe(false)
    expect(q8.every((b) => b === 3)).toBe(true)
    expect(repack(new Uint8Array(144 * 8), 12, 8, 300)).toBe(false)
    // A view too short for rows × cols is refused, not overrun.
    expect(repack(new Uint8Array(144 * 7), 12, 8, 256)).toBe(false)
  })

  it('a Q4_K_M mixture (Q6_K attn_v, ffn_down in layer 0) decodes to the plain layout bits, fused and op by op', () => {
    // dim 256, 4 heads of 64, 1 KV head: layer 0 multiplies [Wq; Wk] (320 rows) and a 64-row
    // Q6_K Wv into one output, layer 1 a stacked 384-row Wqkv; ffn 512 gives a 1024-row W13.
    const mix = (n: string): QuantDType => (/^blk\.0\.(attn_v|ffn_down)$/.test(n) ? 'q6_k' : 'q4_k')
    const spec = '256,2,4,1,512,300'
    const logits = (k: FastKernels): Float32Array[] => {
      const model = withBlockTypes(createRandomModel(parseShape(spec), { dtype: 'f32', seed: 9, seqLen: 32 }), mix)
      const edge = createEdge({ model, kernels: k })
      const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels: k, kvDType: 'f16' })
      shard.openSession('s', { maxLength: 24 })
      const out: Float32Array[] = []
      let pos = 0
      for (const step of [[1, 40, 70, 2, 9, 11, 5, 8, 100], [7], [33]]) {
        out.push(edge.logits(shard.forward('s', edge.embed(step), pos), step.length))
        pos += step.length
      }
      return out
    }
    const wasm = logits(fast(2, false))
    const fused = logits(fast(2))
    const opByOp = createFastKernels({ threads: 2, fusedBlock: false })
    open.push(opByOp)
    const ops = logits(opByOp)
    for (let i = 0; i < wasm.length; i++) {
      expect(wasm[i].every(Number.isFinite)).toBe(true)
      expect(fused[i]).toEqual(wasm[i])
      expect(ops[i]).toEqual(wasm[i])
    }
  })
})
