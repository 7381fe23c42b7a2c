import { afterAll, describe, expect, it } from 'vitest'
import { createEdge, createFastKernels, createRandomModel, createShard, type Kernels, parseShape } from '../../shards/index.js'
import { matmulExact } from '../../shards/kernels/kernels-ref-exact.js'
import { loadNativeAddon } from '../../shards/native/load.js'
import { quantizeMatrix } from '../../shards/quant/codecs.js'
import type { QuantDType } from '../../shards/quant/quant-blocks.js'
import { randomBlockMatrix, rng, withBlockTypes } from '../helpers/random-blocks.js'

// No 4 GiB ceiling: weights past the WebAssembly heap go to native buffers (allocBuffer) that the
// native kernels address directly, with the same bits as weights in the heap. The heap's share
// of weights is set low here so a small model takes that path.

const addon = loadNativeAddon()
const open: Kernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

function randn(n: number, seed: number): Float32Array {
  const rand = rng(seed)
  return Float32Array.from({ length: n }, () => rand() * 2 - 1)
}

describe.skipIf(!addon?.allocBuffer || !addon.quantTypes)('weights in native buffers', () => {
  it('every weight type multiplies from a native buffer with the bits of its exact definition, decode and batched', () => {
    const k = createFastKernels({ threads: 2, heapWeightBytes: 0 })
    open.push(k)
    const cases: Array<[string, () => ReturnType<typeof quantizeMatrix>]> = [
      ['f32', () => quantizeMatrix(randn(96 * 512, 2), 96, 512, 'f32')],
      ['f16', () => quantizeMatrix(randn(96 * 512, 3), 96, 512, 'f16')],
      ['q8_0', () => quantizeMatrix(randn(96 * 512, 4), 96, 512, 'q8_0')],
      ...(['q4_0', 'q4_k', 'q6_k'] as QuantDType[]).map((t): [string, () => ReturnType<typeof quantizeMatrix>] => [
        t,
        () => randomBlockMatrix(t, 96, 512, 5)
      ])
    ]
    for (const [name, make] of cases) {
      const w = make()
      const before = k.placement?.().nativeBufferBytes ?? 0
      const prepared = k.prepare(w)
      expect(k.placement?.().nativeBufferBytes, name).toBe(before + w.data.byteLength)
      for (const T of [1, 3, 12]) {
        const x = randn(T * 512, T)
        const got = new Float32Array(T * 96)
        k.matmul(got, x, prepared, T)
        const exact = new Float32Array(T * 96)
        matmulExact(exact, x, w, T)
        expect(got, `${name} T=${T}`).toEqual(exact)
      }
    }
    expect(k.placement?.().slowWeightBytes).toBe(0)
  })

  it('a span whose weights live in native buffers gives the logits of one in the heap (fused and op by op)', () => {
    const spec = '256,2,4,2,512,300'
    const mix = (n: string): QuantDType => (/^blk\.0\.(attn_v|ffn_down)$/.test(n) ? 'q6_k' : 'q4_k')
    const logitsOf = (heapWeightBytes: number | undefined, fusedBlock: boolean) => {
      const kernels = createFastKernels({ threads: 2, heapWeightBytes, fusedBlock })
      open.push(kernels)
      const model = withBlockTypes(createRandomModel(parseShape(spec), { dtype: 'f32', seed: 5, seqLen: 32 }), mix)
      const edge = createEdge({ model, kernels })
      const shard = createShard({ model, start: 0, end: 2, kernels })
      shard.openSession('s', { maxLength: 24 })
      const out: Float32Array[] = []
      let pos = 0
      for (const step of [[1, 40, 70], [7], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]]) {
        out.push(edge.logits(shard.forward('s', edge.embed(step), pos), step.length))
        pos += step.length
      }
      return { out, placement: kernels.placement?.() }
    }
    const heap = logitsOf(undefined, true)
    expect(heap.placement?.nativeBufferBytes).toBe(0)
    for (const fused of [true, false]) {
      // Half of the weights in the heap, the rest in native buffers.
      const spilled = logitsOf(600_000, fused)
      expect(spilled.placement?.nativeBufferBytes).toBeGreaterThan(0)
      for (let i = 0; i < heap.out.length; i++) expect(spilled.out[i]).toEqual(heap.out[i])
    }
  })
})
