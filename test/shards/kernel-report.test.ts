import { afterAll, describe, expect, it } from 'vitest'
import {
  createFastKernels,
  createRandomModel,
  createShard,
  type FastKernels,
  MODEL_SHAPES,
  spanKernelReport,
  spanSlowReasons
} from '../../shards/index.js'
import { loadNativeAddon } from '../../shards/native/load.js'

// Where a span's KV lives and what `node start` says about it (shards/kernels/kernel-report.ts): with
// the native addon, KV layers are native buffers (never the 4 GiB WebAssembly heap); without
// it they share the heap with the weights, and a span whose one-session KV does not fit what is
// left is reported slow with the cause, never silently.

const made: FastKernels[] = []
afterAll(() => {
  for (const k of made) k.close?.()
})

describe('span kernel report: KV memory', () => {
  it('with the native addon, KV layers live in native buffers and the fused path reads them there', () => {
    if (!loadNativeAddon()?.allocBuffer) return
    const kernels = createFastKernels({ threads: 2 })
    made.push(kernels)
    const model = createRandomModel(MODEL_SHAPES.tiny, { dtype: 'q8_0', seed: 4 })
    const shard = createShard({ model, start: 0, end: 3, kernels, kvDType: 'f16' })
    const ref = createShard({
      model,
      start: 0,
      end: 3,
      kernels: createFastKernels({ threads: 1, native: false }),
      kvDType: 'f16'
    })
    const report = spanKernelReport(kernels, shard)
    expect(report.kvMemory).toBe('native')
    expect(report.slowKv).toBeUndefined()
    const heapBefore = kernels.placement?.().kvHeapFreeBytes ?? 0
    shard.openSession('s', { maxLength: 64 })
    ref.openSession('s', { maxLength: 64 })
    // the heap did not give the KV a byte
    expect(kernels.placement?.().kvHeapFreeBytes).toBe(heapBefore)
    const x = new Float32Array(5 * model.config.dim).map((_, i) => Math.sin(i))
    // native-buffer KV, fused native blocks: the bits of WebAssembly with heap KV
    expect(shard.forward('s', x.slice(), 0)).toEqual(ref.forward('s', x.slice(), 0))
    const step = x.slice(0, model.config.dim)
    expect(shard.forward('s', step.slice(), 5)).toEqual(ref.forward('s', step.slice(), 5))
  })

  it('without the addon, a span whose KV does not fit the rest of the heap says so (kernels "+slow", the cause)', () => {
    const kernels = createFastKernels({ threads: 1, native: false })
    made.push(kernels)
    const fits = createShard({
      model: createRandomModel(MODEL_SHAPES.tiny, { dtype: 'f32', seed: 4 }),
      start: 0,
      end: 2,
      kernels
    })
    const ok = spanKernelReport(kernels, fits)
    expect(ok).toMatchObject({ kernels: 'wasm-simd', kvMemory: 'heap' })
    expect(spanSlowReasons(ok)).toEqual([])
    // 2^24 positions of f16 KV over 3 blocks: past the 4 GiB heap
    const model = createRandomModel(MODEL_SHAPES.tiny, { dtype: 'f32', seed: 4, seqLen: 2 ** 24 })
    const big = createShard({ model, start: 0, end: 3, kernels, kvDType: 'f16' })
    const report = spanKernelReport(kernels, big)
    expect(report.kernels).toBe('wasm-simd+slow')
    expect(report.slowKv).toMatch(/does not fit the \d+ MiB left in the 4 GiB WebAssembly heap/)
    expect(spanSlowReasons(report)).toEqual([report.slowKv])
  })
})
