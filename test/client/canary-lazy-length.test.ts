import { describe, expect, it } from 'vitest'
import { DEFAULT_CANARY_LENGTH } from '../../canary/index.js'
import { CanaryMaterial } from '../../client/verification/canary-decoys.js'
import { createReferenceKernels, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

// With the default canary length, a client builds its canaries as long as its longest real
// session so far (decoys copy real sessions' shapes, so never run longer), and rebuilds them
// longer when a session outgrows them: the same tokens and the same states, bit for bit, at the
// positions built before, so a decoy in progress continues on the same canary.

const model = openModelFile(GGUF_PATH)
const kernels = createReferenceKernels()
const prompts = ['Once upon a time, there was a little cat.', 'Tom went to the park.', 'The sun was warm.']
const material = (length?: number) => new CanaryMaterial(model, { kernels, prompts, seed: 5, maxLength: 20, length })
const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)

describe('canaries as long as the real sessions', () => {
  it('builds to the session length, grows at least twofold, keeps what was built', { timeout: 120_000 }, () => {
    const m = material()
    expect(m.length).toBe(DEFAULT_CANARY_LENGTH) // the cap
    const short = m.setFor(1, 20)
    expect(short.canaries.map((c) => c.tokens.length)).toEqual([20, 20, 20])
    expect(m.setFor(2)).toBe(m.setFor(2)) // no rebuild without a longer session
    expect(m.setFor(2).canaries[0].tokens).toHaveLength(20)
    const long = m.setFor(1, 30)
    expect(long.canaries.map((c) => c.tokens.length)).toEqual([40, 40, 40]) // twice 20
    short.canaries.forEach((c, i) => {
      const l = long.canaries[i]
      expect(l.tokens.slice(0, 20)).toEqual(c.tokens)
      expect(bits(l.inputs.subarray(0, c.inputs.length)).equals(bits(c.inputs))).toBe(true)
      for (const [k, o] of c.outputs.entries()) expect(bits(l.outputs[k].subarray(0, o.length)).equals(bits(o))).toBe(true)
    })
    // a session past the cap gets canaries of the cap
    expect(m.setFor(1, 10_000).canaries[0].tokens).toHaveLength(Math.min(DEFAULT_CANARY_LENGTH, model.config.seqLen))
  })

  it('an explicit length is built as given, whatever the sessions', { timeout: 60_000 }, () => {
    const m = material(48)
    expect(m.setFor(1, 10).canaries.map((c) => c.tokens.length)).toEqual([48, 48, 48])
  })
})
