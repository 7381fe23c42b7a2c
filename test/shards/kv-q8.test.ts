import { describe, expect, it } from 'vitest'
import { createEdge, createShard, KvCache, openModelFile } from '../../shards/index.js'
import { selectKernels } from '../../shards/kernels/kernels-fast.js'
import { createReferenceKernels } from '../../shards/kernels/kernels-ref.js'
import type { KvDType } from '../../shards/kv-cache.js'

const MODEL = 'models/stories260K.gguf'

function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 4294967296 - 0.5
  }
}

describe('q8_0 KV cache', () => {
  it('stores 34 bytes per 32 values and refuses a kvDim that is not whole blocks', () => {
    const q = new KvCache(2, 64, 10, 'q8_0')
    const f = new KvCache(2, 64, 10, 'f32')
    expect(q.sizeBytes).toBe(2 * 2 * 10 * 2 * 34) // 2 layers × (K, V) × 10 rows × 2 blocks × 34 bytes
    expect(q.sizeBytes / f.sizeBytes).toBeCloseTo(34 / 128)
    expect(() => new KvCache(1, 48, 4, 'q8_0')).toThrow(/multiple of 32/)
  })

  it('attention on a q8_0 cache is within Q8_0 rounding of the f32 cache, and export → import keeps the bytes', () => {
    const kvDim = 64
    const T = 12
    const r = rng(9)
    const k = Float32Array.from({ length: T * kvDim }, r)
    const v = Float32Array.from({ length: T * kvDim }, r)
    const q = Float32Array.from({ length: T * 128 }, r)
    const ref = createReferenceKernels()
    const run = (dtype: KvDType) => {
      const cache = new KvCache(1, kvDim, 16, dtype)
      cache.write(0, 0, T, k, v)
      cache.length = T
      const out = new Float32Array(T * 128)
      ref.attention(out, q, cache.layers[0], { T, startPos: 0, nHeads: 4, nKvHeads: 2, headDim: 32 })
      return { out, cache }
    }
    const a = run('f32').out
    const { out: b, cache } = run('q8_0')
    // Each K/V element moves by at most half a Q8_0 step (amax/254 ≤ 0.5/254): outputs by ~1e-3.
    for (let i = 0; i < a.length; i++) expect(Math.abs(a[i] - b[i])).toBeLessThan(4e-3)
    const bytes = cache.exportRows(0, T)
    expect(bytes.length).toBe(T * cache.bytesPerPosition)
    const copy = new KvCache(1, kvDim, 16, 'q8_0')
    copy.importRows(0, bytes)
    expect(Buffer.from(copy.exportRows(0, T)).equals(Buffer.from(bytes))).toBe(true)
  })

  it('stories260K with a q8_0 cache: logits near the f32 cache, on the reference and the fast kernels', () => {
    const model = openModelFile(MODEL)
    try {
      const prompt = [1, 400, 401, 402, 403, 404]
      const logits = (dtype: KvDType, fast: boolean) => {
        const kernels = fast ? selectKernels({ kind: 'auto', threads: 1 }) : createReferenceKernels()
        try {
          const edge = createEdge({ model, kernels })
          const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels, kvDType: dtype })
          shard.openSession('s', { maxLength: 32 })
          const first = edge.logits(shard.forward('s', edge.embed(prompt), 0), prompt.length)
          const next = edge.logits(shard.forward('s', edge.embed([405]), prompt.length), 1)
          return Float32Array.from([...first, ...next])
        } finally {
          kernels.close?.()
        }
      }
      const base = logits('f32', false)
      for (const fast of [false, true]) {
        const got = logits('q8_0', fast)
        let num = 0
        let den = 0
        for (let i = 0; i < base.length; i++) {
          num += (got[i] - base[i]) ** 2
          den += base[i] ** 2
        }
        // About 0.02 on this 64-dim model: every key and value rounded to 8 bits per 32-block.
        expect(Math.sqrt(num / den)).toBeLessThan(0.04)
      }
    } finally {
      model.close()
    }
  })
})
