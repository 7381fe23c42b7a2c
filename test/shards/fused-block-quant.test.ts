import { afterAll, describe, expect, it } from 'vitest'
import { createEdge, createFastKernels, createRandomModel, createShard, type Kernels, parseShape } from '../../shards/index.js'
import { loadNativeAddon } from '../../shards/native/load.js'
import type { QuantDType } from '../../shards/quant/quant-blocks.js'
import { withBlockTypes } from '../helpers/random-blocks.js'

// The native block (shards/native/block.cc) on block types (quant-dot.cc): the bits of the
// op-by-op path for any thread count, including llama.cpp's Q4_K_M mixture where attn_v and
// ffn_down of some layers are Q6_K (Wv then multiplies on its own beside [Wq; Wk]).

const addon = loadNativeAddon()
const open: Kernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

type Mixture = (name: string) => QuantDType
/** Q4_K with Q6_K attn_v / ffn_down in layer 0 (use_more_bits picks the first layers). */
const q4km: Mixture = (n) => (/^blk\.0\.(attn_v|ffn_down)$/.test(n) ? 'q6_k' : 'q4_k')
const legacy: Mixture = (n) =>
  n.endsWith('attn_v') ? 'q5_1' : n.includes('ffn') ? 'q5_0' : n.endsWith('attn_output') ? 'q4_1' : 'q4_0'
const kMix: Mixture = (n) => (n.endsWith('attn_v') ? 'q3_k' : n.includes('ffn') ? 'q5_k' : 'q2_k')

function run(spec: string, mix: Mixture, threads: number, fusedBlock: boolean) {
  const kernels = createFastKernels({ threads, fusedBlock })
  open.push(kernels)
  let fused = 0
  const span = kernels.spanForward?.bind(kernels)
  if (span)
    kernels.spanForward = (...a) => {
      const ran = span(...a)
      if (ran) fused += a[3].length
      return ran
    }
  const inner = kernels.blockForward?.bind(kernels)
  if (inner)
    kernels.blockForward = (...a) => {
      const ran = inner(...a)
      if (ran) fused++
      return ran
    }
  const model = withBlockTypes(createRandomModel(parseShape(spec), { dtype: 'f32', seed: 5, seqLen: 32 }), mix)
  const edge = createEdge({ model, kernels })
  const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels, kvDType: 'f16' })
  shard.openSession('s', { maxLength: 24 })
  const logits: Float32Array[] = []
  let pos = 0
  for (const step of [[1, 40, 70], [7], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [33]]) {
    logits.push(edge.logits(shard.forward('s', edge.embed(step), pos), step.length))
    pos += step.length
  }
  return { logits, fused }
}

const same = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer).equals(Buffer.from(b.buffer))

describe.skipIf(!addon?.fusedBlock || !addon.quantTypes)('native decode block on block types', () => {
  const cases: Array<[string, string, Mixture]> = [
    ['q4_k_m', '256,2,4,2,512,300', q4km],
    ['legacy', '128,2,4,1,192,300', legacy],
    ['q2_k/q3_k/q5_k', '256,1,2,1,256,300', kMix]
  ]
  for (const [name, spec, mix] of cases) {
    it(`${name} ${spec}: fused = op by op, bit for bit, with 1 and 2 threads`, () => {
      const ops = run(spec, mix, 2, false)
      const one = run(spec, mix, 1, true)
      const two = run(spec, mix, 2, true)
      const blocks = parseShape(spec).nLayers
      expect(ops.fused).toBe(0)
      expect(one.fused).toBe(4 * blocks)
      expect(two.fused).toBe(4 * blocks)
      for (let i = 0; i < ops.logits.length; i++) {
        expect(ops.logits[i].every(Number.isFinite)).toBe(true)
        expect(same(one.logits[i], ops.logits[i])).toBe(true)
        expect(same(two.logits[i], ops.logits[i])).toBe(true)
      }
    })
  }
})
