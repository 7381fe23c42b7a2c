import { afterAll, describe, expect, it } from 'vitest'
import { createEdge, createFastKernels, createRandomModel, createShard, type Kernels, parseShape } from '../../shards/index.js'
import { loadNativeAddon } from '../../shards/native/load.js'

// The native block (shards/native/block.cc) runs a whole block in one call (decode steps, and
// prefill pieces on the batched kernels). It must give exactly the bits of the op-by-op path on the same kernels, for any thread
// count, for f32 and Q8_0 weights, f32 and f16 KV caches, grouped-query attention and head
// sizes that are not a multiple of the vector width.

const addon = loadNativeAddon()
const open: Kernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

/** Logits of steps of T = 5, 3, 1, 12, 1 (decode and batched kernels inside), and how many blocks ran fused. */
function run(
  spec: string,
  dtype: 'f32' | 'q8_0',
  kvDType: 'f32' | 'f16',
  threads: number,
  fusedBlock: boolean,
  hugePages = true
) {
  const kernels = createFastKernels({ threads, fusedBlock, hugePages })
  open.push(kernels)
  let fused = 0
  const inner = kernels.blockForward?.bind(kernels)
  if (inner)
    kernels.blockForward = (...a) => {
      const ran = inner(...a)
      if (ran) fused++
      return ran
    }
  // Decode-sized steps run the whole span in one call: count its blocks too.
  const span = kernels.spanForward?.bind(kernels)
  if (span)
    kernels.spanForward = (...a) => {
      const ran = span(...a)
      if (ran) fused += a[3].length
      return ran
    }
  const model = createRandomModel(parseShape(spec), { dtype, seed: 11, seqLen: 32 })
  const edge = createEdge({ model, kernels })
  const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels, kvDType })
  shard.openSession('s', { maxLength: 24 })
  const logits: Float32Array[] = []
  let pos = 0
  for (const step of [[1, 40, 70, 90, 120], [7, 8, 9], [200], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], [33]]) {
    const h = shard.forward('s', edge.embed(step), pos)
    logits.push(edge.logits(h, step.length))
    pos += step.length
  }
  return { logits, fused }
}

const same = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer).equals(Buffer.from(b.buffer))

describe.skipIf(!addon?.fusedBlock)('native decode block', () => {
  const cases: Array<[string, 'f32' | 'q8_0']> = [
    ['96,3,6,2,160,300', 'f32'],
    ['96,3,6,2,160,300', 'q8_0'],
    ['120,2,5,1,200,300', 'f32'], // head size 24, one KV head
    ['160,2,5,5,224,300', 'q8_0'], // head size 32, 7 blocks of 32 in the FFN
    ['160,1,2,1,224,300', 'f32'] // head size 80: the attention's 64- and 16-wide value chunks
  ]
  for (const [spec, dtype] of cases) {
    for (const kvDType of ['f32', 'f16'] as const) {
      it(`${spec} ${dtype}, ${kvDType} KV: fused = op by op, bit for bit, with 1 and 2 threads`, () => {
        const ops = run(spec, dtype, kvDType, 2, false)
        const one = run(spec, dtype, kvDType, 1, true)
        const two = run(spec, dtype, kvDType, 2, true)
        const blocks = parseShape(spec).nLayers
        expect(ops.fused).toBe(0)
        expect(one.fused).toBe(5 * blocks)
        expect(two.fused).toBe(5 * blocks)
        for (let i = 0; i < ops.logits.length; i++) {
          expect(same(one.logits[i], ops.logits[i])).toBe(true)
          expect(same(two.logits[i], ops.logits[i])).toBe(true)
        }
      })
    }
  }

  it('huge-page advice for the kernel memory changes no bit', () => {
    expect(addon?.adviseHugePages).toBeTypeOf('function')
    const plain = run('96,3,6,2,160,300', 'q8_0', 'f32', 2, true, false)
    const huge = run('96,3,6,2,160,300', 'q8_0', 'f32', 2, true, true)
    for (let i = 0; i < plain.logits.length; i++) expect(same(huge.logits[i], plain.logits[i])).toBe(true)
  })

  it("its exp is V8's Math.exp, bit for bit (SwiGLU depends on it)", () => {
    const jsExp = addon?.jsExp
    expect(jsExp).toBeTypeOf('function')
    const f = new Float32Array(1)
    let seed = 12345
    const rand = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed / 2 ** 32
    }
    const xs = [0, -0, 1, -1, 0.5, -0.5, 0.35, -0.35, 700, -700, 710, -746, 1e-10, -1e-10, Infinity, -Infinity]
    for (let i = 0; i < 200_000; i++) {
      f[0] = (rand() - 0.5) * 2 ** (rand() * 16 - 6)
      xs.push(f[0])
    }
    const bad = xs.filter((x) => !Object.is(jsExp?.(x), Math.exp(x)))
    expect(bad).toEqual([])
    expect(Number.isNaN(jsExp?.(Number.NaN))).toBe(true)
  })
})
