import { afterAll, describe, expect, it } from 'vitest'
import { GgmlShard } from '../../shards/ggml/ggml-shard.js'
import {
  createShard,
  f16ToF32,
  InvalidArgumentError,
  OutOfCacheError,
  openModelFile,
  PositionError,
  UnknownSessionError
} from '../../shards/index.js'
import { ggmlCpuSkipReason } from '../helpers/ggml.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 32: a ggml-cpu span keeps Shard's session contract: several sessions batched in one
// graph, rewind for speculation, KV export/import in the engine's byte layout (to and from
// the engine's f16 cache), and typed errors that change no session.

const why = ggmlCpuSkipReason()
const model = openModelFile(GGUF_PATH)
const { dim } = model.config
const shards: GgmlShard[] = []
afterAll(() => {
  for (const s of shards) s.close()
  model.close()
})

function span(): GgmlShard {
  const s = new GgmlShard({ model, start: 1, end: 4, backend: 'ggml-cpu', threads: 1 })
  shards.push(s)
  return s
}

function rows(T: number, seed: number): Float32Array {
  const x = new Float32Array(T * dim)
  let s = seed >>> 0 || 1
  for (let i = 0; i < x.length; i++) {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    x[i] = ((s >>> 0) / 2 ** 32 - 0.5) * 2
  }
  return x
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]))
  return m
}

describe.skipIf(why !== '')('ggml-cpu span sessions', () => {
  it('a batch of sessions gives what each step gives alone', () => {
    const g = span()
    for (const id of ['a', 'b', 'c']) g.openSession(id, { maxLength: 32 })
    g.forward('a', rows(5, 1), 0)
    g.forward('b', rows(3, 2), 0)
    const steps = [
      { id: 'a', hidden: rows(1, 3), startPos: 5 },
      { id: 'b', hidden: rows(2, 4), startPos: 3 },
      { id: 'c', hidden: rows(4, 5), startPos: 0 }
    ]
    const batched = g.forwardBatch(steps)
    const alone = span()
    for (const [id, T, seed] of [
      ['a', 5, 1],
      ['b', 3, 2]
    ] as const) {
      alone.openSession(id, { maxLength: 32 })
      alone.forward(id, rows(T, seed), 0)
    }
    alone.openSession('c', { maxLength: 32 })
    steps.forEach((st, i) => {
      expect(maxDiff(batched[i], alone.forward(st.id, st.hidden, st.startPos)), st.id).toBeLessThan(1e-4)
      expect(g.sessionLength(st.id)).toBe(alone.sessionLength(st.id))
    })
  })

  it('rewind: a step at an earlier position replaces what came after it', () => {
    const g = span()
    g.openSession('s', { maxLength: 32 })
    g.forward('s', rows(6, 7), 0)
    const first = g.forward('s', rows(2, 8), 6)
    g.forward('s', rows(3, 9), 8)
    g.rewind('s', 6)
    expect(g.sessionLength('s')).toBe(6)
    expect(maxDiff(g.forward('s', rows(2, 8), 6), first)).toBe(0)
    expect(() => g.rewind('s', 9)).toThrow(PositionError)
  })

  it("KV moves between ggml and the engine's f16 cache in the same bytes", () => {
    const engine = createShard({ model, start: 1, end: 4, kvDType: 'f16' })
    const g = span()
    engine.openSession('k', { maxLength: 32 })
    g.openSession('k', { maxLength: 32 })
    const prompt = rows(7, 11)
    engine.forward('k', prompt, 0)
    g.forward('k', prompt, 0)
    expect(g.kvBytesPerPosition('k')).toBe(engine.kvBytesPerPosition('k'))
    const fromGgml = g.exportKv('k', 0, 7)
    const fromEngine = engine.exportKv('k', 0, 7)
    expect(fromGgml.byteLength).toBe(fromEngine.byteLength)
    // f16 values of the same keys and values, computed two ways: close, not equal.
    const a = new Uint16Array(fromGgml.buffer, fromGgml.byteOffset, fromGgml.byteLength / 2)
    const b = new Uint16Array(fromEngine.buffer, fromEngine.byteOffset, fromEngine.byteLength / 2)
    let worst = 0
    for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(f16ToF32(a[i]) - f16ToF32(b[i])))
    expect(worst).toBeLessThan(2e-2)
    // The engine's KV imported into a fresh ggml session continues like the engine.
    const moved = span()
    moved.openSession('k', { maxLength: 32 })
    expect(moved.importKv('k', 0, fromEngine, 'f16')).toBe(7)
    expect(moved.exportKv('k', 0, 7)).toEqual(fromEngine)
    const next = rows(1, 12)
    expect(maxDiff(moved.forward('k', next, 7), engine.forward('k', next, 7))).toBeLessThan(1e-2)
    // ggml's KV into another ggml session: the same outputs as never moving.
    const again = span()
    again.openSession('k', { maxLength: 32 })
    again.importKv('k', 0, fromGgml)
    expect(maxDiff(again.forward('k', next, 7), g.forward('k', next, 7))).toBe(0)
    engine.close()
  })

  it('bad steps are typed errors and change no session', () => {
    const g = span()
    g.openSession('e', { maxLength: 8 })
    g.forward('e', rows(2, 1), 0)
    expect(() => g.forward('nope', rows(1, 1), 0)).toThrow(UnknownSessionError)
    expect(() => g.forward('e', rows(1, 1), 3)).toThrow(PositionError)
    expect(() => g.forward('e', new Float32Array(dim + 1), 2)).toThrow(InvalidArgumentError)
    expect(() => g.forward('e', rows(7, 1), 2)).toThrow(OutOfCacheError)
    expect(() =>
      g.forwardBatch([
        { id: 'e', hidden: rows(1, 1), startPos: 2 },
        { id: 'e', hidden: rows(1, 1), startPos: 2 }
      ])
    ).toThrow(InvalidArgumentError)
    expect(() => g.importKv('e', 0, new Uint8Array(3))).toThrow(InvalidArgumentError)
    expect(() => g.importKv('e', 0, new Uint8Array(g.kvBytesPerPosition('e')), 'q8_0')).toThrow(InvalidArgumentError)
    expect(() => new GgmlShard({ model, start: 0, end: 2, backend: 'ggml-cpu', kvDType: 'q8_0' })).toThrow(InvalidArgumentError)
    expect(g.sessionLength('e')).toBe(2)
  })

  it('a warm-up (every prompt size class) leaves no session behind and changes no output', () => {
    const g = span()
    g.openSession('w', { maxLength: 16 })
    const before = g.forward('w', rows(5, 9), 0)
    expect(g.warmUp([2, 3, 8, 33, 65])).toBeGreaterThan(0)
    expect(g.sessionCount).toBe(1)
    g.rewind('w', 0)
    expect(g.forward('w', rows(5, 9), 0)).toEqual(before)
  })
})
