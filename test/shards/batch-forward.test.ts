import { afterAll, describe, expect, it } from 'vitest'
import {
  createRandomModel,
  createReferenceKernels,
  createShard,
  type Kernels,
  type KvDType,
  PositionError,
  parseShape,
  selectKernels
} from '../../shards/index.js'

// Shard.forwardBatch (continuous batching, issue #18): the steps of several sessions as one
// forward give each session exactly the bits it gets alone, whatever the batch's make-up.

const open: Kernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

function rows(n: number, dim: number, seed: number): Float32Array {
  const out = new Float32Array(n * dim)
  let s = seed
  for (let i = 0; i < out.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0
    out[i] = ((s >>> 8) / 2 ** 24 - 0.5) * 2
  }
  return out
}

const kernelSets: Array<[string, () => Kernels]> = [
  ['reference', () => createReferenceKernels()],
  ['auto (native or wasm)', () => selectKernels({ kind: 'auto', threads: 2 })],
  ['wasm', () => selectKernels({ kind: 'wasm', threads: 2 })]
]

describe('Shard.forwardBatch equals each session alone', () => {
  for (const [name, make] of kernelSets) {
    for (const [dtype, kv] of [
      ['q8_0', 'f32'],
      ['f32', 'f16'],
      ['q8_0', 'q8_0']
    ] as Array<['q8_0' | 'f32', KvDType]>) {
      it(`${name}: ${dtype} weights, ${kv} KV, decode and multi-row steps`, () => {
        const kernels = make()
        open.push(kernels)
        const model = createRandomModel(parseShape('256,3,4,2,384,300'), { dtype, seed: 11, seqLen: 64 })
        const dim = model.config.dim
        const batched = createShard({ model, start: 0, end: 3, kernels, kvDType: kv })
        const alone = createShard({ model, start: 0, end: 3, kernels, kvDType: kv })
        const ids = ['a', 'b', 'c', 'd']
        const lengths = [5, 9, 1, 3]
        ids.forEach((id, i) => {
          for (const s of [batched, alone]) {
            s.openSession(id, { maxLength: 64 })
            s.forward(id, rows(lengths[i], dim, 100 + i), 0)
          }
        })
        // rounds of batches of varying make-up: one row each, a 3-row (speculative) step, a subset
        const rounds: Array<Array<[string, number]>> = [
          [
            ['a', 1],
            ['b', 1],
            ['c', 1],
            ['d', 1]
          ],
          [
            ['b', 3],
            ['d', 1]
          ],
          [
            ['a', 1],
            ['c', 2],
            ['b', 1]
          ]
        ]
        let seed = 1000
        for (const round of rounds) {
          const steps = round.map(([id, n]) => ({ id, hidden: rows(n, dim, seed++), startPos: batched.sessionLength(id) }))
          const outs = batched.forwardBatch(steps)
          steps.forEach((st, i) => {
            const want = alone.forward(st.id, st.hidden, st.startPos)
            expect(Buffer.from(outs[i].buffer).equals(Buffer.from(want.buffer))).toBe(true)
            expect(batched.sessionLength(st.id)).toBe(alone.sessionLength(st.id))
          })
        }
        // a rewound step inside a batch (a retried or rejected position) also matches
        const steps = [
          { id: 'a', hidden: rows(1, dim, 7), startPos: batched.sessionLength('a') - 1 },
          { id: 'c', hidden: rows(1, dim, 8), startPos: batched.sessionLength('c') }
        ]
        const outs = batched.forwardBatch(steps)
        steps.forEach((st, i) => {
          expect(Buffer.from(outs[i].buffer).equals(Buffer.from(alone.forward(st.id, st.hidden, st.startPos).buffer))).toBe(true)
        })
        batched.close()
        alone.close()
        model.close()
      })
    }
  }

  it('a bad step refuses the whole batch before any KV changes', () => {
    const model = createRandomModel(parseShape('64,2,4,2,96,300'), { dtype: 'f32', seed: 3, seqLen: 16 })
    const shard = createShard({ model, start: 0, end: 2 })
    shard.openSession('a')
    shard.openSession('b')
    shard.forward('a', rows(2, 64, 1), 0)
    const steps = [
      { id: 'a', hidden: rows(1, 64, 2), startPos: 2 },
      { id: 'b', hidden: rows(1, 64, 3), startPos: 5 }
    ]
    expect(() => shard.forwardBatch(steps)).toThrow(PositionError)
    expect(shard.sessionLength('a')).toBe(2)
    expect(shard.sessionLength('b')).toBe(0)
    expect(() =>
      shard.forwardBatch([
        { id: 'a', hidden: rows(1, 64, 2), startPos: 2 },
        { id: 'a', hidden: rows(1, 64, 2), startPos: 3 }
      ])
    ).toThrow(/twice/)
    model.close()
  })
})
