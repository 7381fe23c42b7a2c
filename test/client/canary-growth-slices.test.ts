import { describe, expect, it } from 'vitest'
import { CanariesPendingError, CanariesSpentError } from '../../canary/index.js'
import { secretPrompts } from '../../client/verification/canaries/canary-secret.js'
import { CanaryMaterial } from '../../client/verification/canary-decoys.js'
import { createReferenceKernels, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 16: a new client's secret set grows twice in its start-up burst (a peer is sent each
// canary once). Built at once, each growth held the real generation: tens of seconds on a 110m
// model (bench swarm-canary, new client). The client builds new canaries in slices between real
// steps instead; the set built so far serves meanwhile, a peer that has seen it all gets no decoy
// until the new canaries are there, and what is built in slices is the same as what is built at
// once. Longer canaries (a longer session starting) are built at once, continued from the old.

const model = openModelFile(GGUF_PATH)
const kernels = createReferenceKernels()
const secret = new Uint8Array(32).fill(9)
const ctx = { forwarding: 'relay' as const, maxLength: 40 }
const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)

function material(inSlices: boolean, length?: number): CanaryMaterial {
  return new CanaryMaterial(model, {
    kernels,
    promptsFrom: (n, more) => secretPrompts(model, secret, { count: n, kernels, ...more }),
    count: 2,
    seed: 11,
    length,
    maxLength: 40,
    inSlices,
    inSlicesOverMs: 0
  })
}

/** A macrotask turn: what a real step's network callbacks get between build slices. */
const turn = () => new Promise((resolve) => setImmediate(resolve))

describe('a canary set grows in slices between real steps', () => {
  it('grows ahead of a peer that is half way through; the peer waits only when it has seen all; same canaries', async () => {
    const sliced = material(true, 40)
    const atOnce = material(false, 40)
    expect(sliced.setFor(1).canaries).toHaveLength(2) // the first build is at once
    sliced.plan(1, ctx, ['p']) // half of 2 seen: the next 2 start building
    await turn()
    expect(sliced.setFor(1).canaries).toHaveLength(2) // still building: the old set serves
    // the last one not seen (if it fits the shape), then nothing until the new ones are built
    expect(() => {
      for (let d = 0; d < 2; d++) sliced.plan(1, ctx, ['p'])
    }).toThrow(CanariesPendingError)
    expect(() => sliced.plan(1, ctx, ['q'])).not.toThrow() // another peer has canaries left
    await sliced.settled()
    // built at once (when the peer has seen them all), the grown set is the same, canary for canary
    for (let d = 0; d < 3 && atOnce.setFor(1).canaries.length < 4; d++) {
      try {
        atOnce.plan(1, ctx, ['p'])
      } catch (err) {
        expect(err).toBeInstanceOf(CanariesSpentError) // grown, and the new ones do not fit the shape
      }
    }
    const a = atOnce.setFor(1).canaries
    const b = sliced.setFor(1).canaries
    expect(b).toHaveLength(4)
    expect(a).toHaveLength(4)
    for (let i = 0; i < 4; i++) {
      expect(b[i].tokens).toEqual(a[i].tokens)
      expect(bits(b[i].inputs).equals(bits(a[i].inputs))).toBe(true)
    }
  })

  it('a longer session lengthens the set at once (its first step asks), continuing each canary', () => {
    const m = material(true)
    expect(m.setFor(1, 20).canaries[0].tokens).toHaveLength(20)
    const long = m.setFor(1, 30).canaries // twice 20, at once: in slices it held every token of that session back
    expect(long.map((c) => c.tokens.length)).toEqual([40, 40])
    const ref = material(false)
    ref.setFor(1, 20)
    const whole = ref.setFor(1, 30).canaries
    long.forEach((c, i) => {
      expect(c.tokens).toEqual(whole[i].tokens)
      expect(bits(c.outputs[0]).equals(bits(whole[i].outputs[0]))).toBe(true)
    })
  })

  it('closing stops a build in slices', async () => {
    const m = material(true, 40)
    m.setFor(1)
    m.plan(1, ctx, ['p']) // half seen: a growth starts in slices
    m.close()
    await m.settled()
    expect(m.setFor(1).canaries).toHaveLength(2)
  })
})
