import { afterAll, describe, expect, it } from 'vitest'
import {
  createReferenceKernels,
  createShard,
  InvalidArgumentError,
  type Kernels,
  type KvDType,
  kvAllocatorOf,
  OutOfCacheError,
  openModelFile,
  PositionError,
  type Shard,
  selectKernels
} from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Shard.exportKv / importKv: moving a session's KV from one shard to another over the same span
// and continuing gives bit-identical outputs to never having moved (reference and fast kernels,
// f32 and f16 caches, KV in kernel memory via allocKv on the fast kernels).

const open: Kernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

function hiddenStates(T: number, dim: number, seed: number): Float32Array {
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

// Prefill 6 positions, then single-token steps up to position 12.
const STEPS: [number, number][] = [[0, 6], ...Array.from({ length: 6 }, (_, i): [number, number] => [6 + i, 1])]

function runSteps(shard: Shard, id: string, steps: [number, number][], dim: number): Float32Array[] {
  return steps.map(([pos, T]) => shard.forward(id, hiddenStates(T, dim, 1000 + pos), pos))
}

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex')

const kernelSets: [string, () => Kernels][] = [
  ['reference', () => createReferenceKernels()],
  ['wasm', () => selectKernels({ kind: 'wasm', threads: 2 })]
]

for (const [kname, makeKernels] of kernelSets) {
  for (const kvDType of ['f32', 'f16'] as KvDType[]) {
    describe(`${kname} kernels, ${kvDType} KV`, () => {
      const kernels = makeKernels()
      open.push(kernels)
      const model = openModelFile(GGUF_PATH)
      afterAll(() => model.close())
      const { dim } = model.config
      const mk = () => createShard({ model, start: 1, end: 4, kernels, kvDType })
      const reference = mk()
      reference.openSession('s', { maxLength: 32 })
      const expected = runSteps(reference, 's', STEPS, dim).map(bits)

      it('keeps the KV where the kernels put it', () => {
        expect(kvAllocatorOf(kernels) !== undefined).toBe(kname === 'wasm')
      })

      it('export [0, 9) on one shard, import on another, continue: bit-identical outputs', () => {
        const a = mk()
        const b = mk()
        a.openSession('s', { maxLength: 32 })
        const before = runSteps(a, 's', STEPS.slice(0, 4), dim).map(bits)
        expect(before).toEqual(expected.slice(0, 4))
        expect(a.sessionLength('s')).toBe(9)
        const data = a.exportKv('s', 0, 9)
        expect(data.length).toBe(9 * a.kvBytesPerPosition('s'))
        expect(a.kvBytesPerPosition('s')).toBe(3 * 2 * model.config.kvDim * (kvDType === 'f32' ? 4 : 2))
        b.openSession('s', { maxLength: 32 })
        expect(b.importKv('s', 0, data)).toBe(9)
        expect(b.sessionLength('s')).toBe(9)
        expect(runSteps(b, 's', STEPS.slice(4), dim).map(bits)).toEqual(expected.slice(4))
        a.close()
        b.close()
      })

      it('a full snapshot then a delta (into a reused buffer) restore the same state', () => {
        const a = mk()
        const b = mk()
        a.openSession('s', { maxLength: 32 })
        b.openSession('s', { maxLength: 32 })
        runSteps(a, 's', STEPS.slice(0, 2), dim) // length 7
        const buf = new Uint8Array(16 * a.kvBytesPerPosition('s'))
        b.importKv('s', 0, a.exportKv('s', 0, 7, buf).slice())
        runSteps(a, 's', STEPS.slice(2, 4), dim) // length 9
        const delta = a.exportKv('s', 7, 9, buf)
        expect(delta.buffer).toBe(buf.buffer)
        b.importKv('s', 7, delta)
        expect(b.exportKv('s', 0, 9)).toEqual(a.exportKv('s', 0, 9))
        expect(runSteps(b, 's', STEPS.slice(4), dim).map(bits)).toEqual(expected.slice(4))
        a.close()
        b.close()
      })

      it('importing at a position below the length truncates the session to from + rows', () => {
        const a = mk()
        a.openSession('s', { maxLength: 32 })
        runSteps(a, 's', STEPS, dim)
        const head = a.exportKv('s', 0, 9)
        const c = mk()
        c.openSession('s', { maxLength: 32 })
        runSteps(c, 's', STEPS.slice(0, 2), dim) // length 7, keep rows [0, 5) of it
        c.importKv('s', 5, head.subarray(0, 0))
        expect(c.sessionLength('s')).toBe(5)
        c.importKv('s', 0, head)
        expect(c.sessionLength('s')).toBe(9)
        expect(runSteps(c, 's', STEPS.slice(4), dim).map(bits)).toEqual(expected.slice(4))
        a.close()
        c.close()
      })

      it('refuses a gap, a partial position, another dtype, out-of-range exports and overflow', () => {
        const a = mk()
        a.openSession('s', { maxLength: 12 })
        runSteps(a, 's', STEPS.slice(0, 2), dim)
        const per = a.kvBytesPerPosition('s')
        const data = a.exportKv('s', 0, 7)
        const b = mk()
        b.openSession('s', { maxLength: 12 })
        expect(() => b.importKv('s', 1, data)).toThrow(PositionError)
        expect(() => b.importKv('s', 0, data.subarray(0, per * 2 + 1))).toThrow(InvalidArgumentError)
        expect(() => b.importKv('s', 0, data, kvDType === 'f32' ? 'f16' : 'f32')).toThrow(InvalidArgumentError)
        expect(() => b.importKv('s', 0, new Uint8Array(per * 13))).toThrow(OutOfCacheError)
        expect(b.sessionLength('s')).toBe(0)
        expect(() => a.exportKv('s', 0, 8)).toThrow(PositionError)
        expect(() => a.exportKv('s', 5, 4)).toThrow(PositionError)
        expect(() => a.exportKv('s', 0, 7, new Uint8Array(per))).toThrow(InvalidArgumentError)
        a.close()
        b.close()
      })
    })
  }
}
