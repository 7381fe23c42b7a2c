import { afterAll, describe, expect, it } from 'vitest'
import {
  createEdge,
  createFastKernels,
  createLocalPipeline,
  createRandomModel,
  createShard,
  type FastKernels,
  generateTokens,
  type Kernels,
  MODEL_SHAPES,
  OutOfCacheError,
  openModelFile,
  parseShape,
  selectKernels
} from '../../shards/index.js'
import { GGUF_PATH, loadReference, maxAbsDiff } from '../helpers/reference.js'

// The engine on the fast kernels (shards/kernels/kernels-fast.ts): llama2.c's tokens still come out,
// logits do not depend on the thread count, KV caches live in (and go back to) kernel memory.

const open: Kernels[] = []
function track<K extends Kernels>(k: K): K {
  open.push(k)
  return k
}
afterAll(() => {
  for (const k of open) k.close?.()
})

describe('stories260K on the fast kernels', () => {
  for (const kind of ['auto', 'wasm'] as const) {
    it(`${kind}: llama2.c's greedy tokens, logits within 1e-4`, async () => {
      const kernels = track(selectKernels({ kind, threads: 2 }))
      const ref = loadReference('stories260K_greedy_once_upon_a_time')
      const model = openModelFile(GGUF_PATH)
      const edge = createEdge({ model, kernels })
      const shards = [createShard({ model, start: 0, end: 2, kernels }), createShard({ model, start: 2, end: 5, kernels })]
      const pipeline = createLocalPipeline(shards, 'ref', model.config.seqLen)
      const logits = new Map<number, Float32Array>()
      const tokens: number[] = []
      for await (const tok of generateTokens({
        edge,
        pipeline,
        promptTokens: ref.prompt_tokens,
        maxTokens: ref.generated_tokens.length,
        temperature: 0,
        onLogits: (l, pos) => logits.set(pos, Float32Array.from(l))
      })) {
        tokens.push(tok)
      }
      await pipeline.close()
      expect(tokens).toEqual(ref.generated_tokens)
      for (const entry of ref.logits) {
        const ours = logits.get(entry.pos)
        if (ours) expect(maxAbsDiff(ours, entry.values)).toBeLessThan(1e-4)
      }
      model.close()
    })
  }
})

/** Logits of a prefill and a few decode steps through Shard and Edge. */
function logitsOf(kernels: Kernels, dtype: 'f32' | 'q8_0', kvDType: 'f32' | 'f16', rest = false): Float32Array[] {
  const model = createRandomModel(parseShape('96,3,6,2,160,300'), { dtype, seed: 7, seqLen: 32 })
  const edge = createEdge({ model, kernels })
  const shard = createShard({ model, start: 0, end: 3, kernels, kvDType })
  shard.openSession('s', { maxLength: 16 })
  const out: Float32Array[] = []
  let h = shard.forward('s', edge.embed([1, 50, 60, 70, 80, 90, 100, 110, 120]), 0)
  out.push(edge.logits(h, 9))
  for (let p = 9; p < 12; p++) {
    if (rest) shard.rest()
    h = shard.forward('s', edge.embed([p * 3]), p)
    if (rest) shard.rest() // between the span and the head too: a worker asleep mid-step
    out.push(edge.logits(h, 1))
  }
  shard.closeSession('s')
  return out
}

describe('fast kernels through Shard and Edge', () => {
  for (const dtype of ['f32', 'q8_0'] as const) {
    for (const kvDType of ['f32', 'f16'] as const) {
      it(`${dtype} weights, ${kvDType} KV: identical logits with 1 and 2 threads (and with or without the native addon)`, () => {
        const one = logitsOf(track(createFastKernels({ threads: 1, native: false })), dtype, kvDType)
        const two = logitsOf(track(createFastKernels({ threads: 2, native: false })), dtype, kvDType)
        const auto = logitsOf(track(createFastKernels({ threads: 2 })), dtype, kvDType)
        expect(two.length).toBe(one.length)
        for (let i = 0; i < one.length; i++) {
          expect(Buffer.from(two[i].buffer).equals(Buffer.from(one[i].buffer))).toBe(true)
          expect(Buffer.from(auto[i].buffer).equals(Buffer.from(one[i].buffer))).toBe(true)
        }
        // Close to the float64 reference kernels (f16 KV and q8_0 activations round more).
        const ref = logitsOf(selectKernels({ kind: 'reference' }), dtype, kvDType)
        const tol = dtype === 'f32' && kvDType === 'f32' ? 1e-4 : 5e-2
        for (let i = 0; i < one.length; i++) expect(maxAbsDiff(one[i], ref[i])).toBeLessThan(tol)
      })
    }
  }

  it('kernel threads sent to sleep between calls (Shard.rest) wake for the next one: same bits', () => {
    for (const dtype of ['f32', 'q8_0'] as const) {
      const spinning = logitsOf(track(createFastKernels({ threads: 2 })), dtype, 'f32')
      const resting = logitsOf(track(createFastKernels({ threads: 2 })), dtype, 'f32', true)
      for (let i = 0; i < spinning.length; i++)
        expect(Buffer.from(resting[i].buffer).equals(Buffer.from(spinning[i].buffer))).toBe(true)
    }
  })

  it('KV caches live in kernel memory, preallocated, freed on close, OutOfCacheError past maxLength', () => {
    const kernels: FastKernels = track(createFastKernels({ threads: 2 }))
    const model = createRandomModel(MODEL_SHAPES.tiny, { dtype: 'f32', seed: 3 })
    const edge = createEdge({ model, kernels })
    const shard = createShard({ model, start: 0, end: 3, kernels, kvDType: 'f16' })
    // warm the activation scratch so only KV allocations change memoryBytes below
    shard.openSession('warm', { maxLength: 9 })
    shard.forward('warm', edge.embed([1, 2, 3, 4, 5, 6, 7, 8]), 0)
    shard.forward('warm', edge.embed([9]), 8) // a decode step (the fused block's scratch and norms)
    shard.closeSession('warm')
    const before = kernels.memoryBytes()
    shard.openSession('a', { maxLength: 8 })
    const kvBytes = 3 * 2 * 8 * model.config.kvDim * 2
    expect(kernels.memoryBytes() - before).toBeGreaterThanOrEqual(kvBytes)
    shard.forward('a', edge.embed([1, 2, 3, 4, 5, 6, 7, 8]), 0)
    expect(() => shard.forward('a', edge.embed([9]), 8)).toThrow(OutOfCacheError)
    shard.rewind('a', 4)
    shard.forward('a', edge.embed([9]), 4)
    shard.openSession('a', { maxLength: 8 }) // reopening frees the old cache first
    expect(kernels.memoryBytes() - before).toBeLessThan(2 * kvBytes)
    expect(shard.closeSession('a')).toBe(true)
    expect(kernels.memoryBytes()).toBe(before)
  })
})

describe('long steps in pieces (ShardInit.maxStepRows)', () => {
  it('a step cut into pieces gives the bits of one batch, and progress still counts up to the blocks', () => {
    const model = createRandomModel(parseShape('96,3,6,2,160,300'), { dtype: 'q8_0', seed: 5, seqLen: 32 })
    const tokens = Array.from({ length: 21 }, (_, i) => (i * 37) % 300)
    const outputs: Float32Array[] = []
    for (const maxStepRows of [64, 8, 5]) {
      const kernels = track(createFastKernels({ threads: 2 }))
      const edge = createEdge({ model, kernels })
      const shard = createShard({ model, start: 0, end: 3, kernels, maxStepRows })
      shard.openSession('s', { maxLength: 24 })
      const progress: number[] = []
      const h = shard.forward('s', edge.embed(tokens), 0, (done, total) => progress.push(done / total))
      expect(progress.at(-1)).toBe(1)
      expect(progress.every((p, i) => i === 0 || p > progress[i - 1])).toBe(true)
      // and the cache the pieces wrote serves the next step exactly like the batch's
      outputs.push(Float32Array.from(h), Float32Array.from(shard.forward('s', edge.embed([7]), 21)))
    }
    for (let i = 2; i < outputs.length; i++)
      expect(Buffer.from(outputs[i].buffer).equals(Buffer.from(outputs[i % 2].buffer))).toBe(true)
  })
})
