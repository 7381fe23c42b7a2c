import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  buildCanarySet,
  buildCanaryTraces,
  buildCanaryTracesInSlices,
  CanaryArgumentError,
  CanarySetMismatchError,
  CanarySetVersionError,
  CorruptCanarySetError,
  canarySetFromTraces,
  createDetector,
  createSpanRunner,
  defaultBenignModel,
  driftMetrics,
  extendCanaryTraces,
  extendCanaryTracesInSlices,
  inputFor,
  loadCanarySet,
  loadOrBuildCanarySet,
  referenceFor,
  runPeerSession,
  saveCanarySet,
  sessionDrifts
} from '../../canary/index.js'
import { createShard, openModelFile } from '../../shards/index.js'

const model = openModelFile('models/stories260K.gguf')
const set = buildCanarySet({
  model,
  boundary: 1,
  ends: [2, 4],
  prompts: ['Once upon a time, there was a little cat.', 'Tom went to the park.'],
  tokensPerPrompt: 24,
  maxPromptTokens: 10
})

describe('canary sets', () => {
  it('holds inputs at the boundary and references that a plain shard reproduces', () => {
    expect(set.canaries).toHaveLength(2)
    const c = set.canaries[0]
    expect(c.tokens[0]).toBe(1) // BOS
    expect(c.promptLength).toBeLessThanOrEqual(10)
    const L = c.tokens.length
    // Decode-style steps on an independent shard [1, 4) give the [1, 4) references bit for bit.
    const shard = createShard({ model, start: 1, end: 4 })
    shard.openSession('x', { maxLength: L })
    for (let p = 0; p < L; p++) {
      expect(driftMetrics(shard.forward('x', inputFor(set, 0, p), p), referenceFor(set, 0, 4, p)).relL2).toBe(0)
    }
    expect(() => referenceFor(set, 0, 3, 0)).toThrow(CanaryArgumentError)
    expect(() => referenceFor(set, 5, 2, 0)).toThrow(CanaryArgumentError)
    expect(() => buildCanarySet({ model, boundary: 5, ends: [5] })).toThrow(CanaryArgumentError)
  })
  it('saves 0600, loads back identically, and refuses other models and damaged files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'canary-'))
    const path = join(dir, 'set.bin')
    saveCanarySet(path, set)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    const back = loadCanarySet(path, { modelId: set.modelId, boundary: 1 })
    expect(back.ends).toEqual([2, 4])
    expect(back.canaries[1].tokens).toEqual(set.canaries[1].tokens)
    expect(back.canaries[1].outputs[1]).toEqual(set.canaries[1].outputs[1])
    expect(() => loadCanarySet(path, { modelId: 'lsm1-other' })).toThrow(CanarySetMismatchError)
    expect(() => loadCanarySet(path, { boundary: 2 })).toThrow(CanarySetMismatchError)
    const bytes = readFileSync(path)
    bytes[bytes.length - 100] ^= 1
    writeFileSync(path, bytes)
    expect(() => loadCanarySet(path)).toThrow(CorruptCanarySetError)
    writeFileSync(path, 'not a canary set')
    expect(() => loadCanarySet(path)).toThrow(CorruptCanarySetError)
  })
  it('refuses a file of the old format (short canaries) with a typed error; loadOrBuild rebuilds it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'canary-'))
    const path = join(dir, 'old.bin')
    saveCanarySet(path, set)
    const bytes = readFileSync(path)
    bytes.write('LSCANRY1', 0, 'latin1') // a format-1 file (its canaries ran to ~40 positions)
    writeFileSync(path, bytes)
    expect(() => loadCanarySet(path)).toThrow(CanarySetVersionError)
    const opts = { model, boundary: 1, ends: [2], prompts: ['Tom went to the park.'], tokensPerPrompt: 32, modelId: set.modelId }
    const rebuilt = loadOrBuildCanarySet(path, opts)
    expect(rebuilt.canaries[0].tokens).toHaveLength(32)
    expect(loadCanarySet(path).canaries[0].outputs[0]).toEqual(rebuilt.canaries[0].outputs[0])
    // a file for another boundary is the caller's mistake, not silently replaced
    expect(() => loadOrBuildCanarySet(path, { ...opts, boundary: 2, ends: [3] })).toThrow(CanarySetMismatchError)
  })
  it('runs canaries to the full default length (256 positions), past where stories end', () => {
    const traces = buildCanaryTraces({ model, prompts: ['Once upon a time, there was a little cat.'], levels: [1, 2, 5] })
    const t = traces.traces[0]
    expect(t.tokens).toHaveLength(256)
    const tok = model.vocabulary!
    expect(t.tokens.slice(1).every((x) => x !== tok.bosId && x !== tok.eosId)).toBe(true)
    expect(t.states[0]).toBeUndefined()
    const long = canarySetFromTraces(traces, 1, [2, 5])
    // every position has a reference: an independent shard, decode steps to the end, matches it
    const shard = createShard({ model, start: 1, end: 5 })
    shard.openSession('y', { maxLength: 256 })
    let pos = 0
    for (const rows of [t.promptLength, ...Array(256 - t.promptLength).fill(1)]) {
      const out = shard.forward('y', inputFor(long, 0, pos, rows), pos)
      expect(driftMetrics(out, referenceFor(long, 0, 5, pos, rows)).relL2).toBe(0)
      pos += rows
    }
    expect(() => canarySetFromTraces(traces, 3, [4])).toThrow(CanaryArgumentError)
  })
  it('an honest peer on the reference kernels reproduces every canary exactly, and is not excluded', () => {
    const runner = createSpanRunner({ model, start: 1, maxEnd: 4 })
    const det = createDetector({ benign: defaultBenignModel() })
    for (const wire of ['f32', 'f16', 'q8_0'] as const) {
      for (let i = 0; i < set.canaries.length; i++) {
        for (const s of sessionDrifts(set, i, runPeerSession(runner, set, i, wire), wire)) {
          if (wire === 'f32') expect(s.drift.relL2).toBe(0)
          det.observe(`peer-${wire}`, s.drift, wire)
        }
      }
    }
    expect(det.excluded()).toEqual([])
  })
})

describe('a grown canary set builds only its new canaries', () => {
  it('extendCanaryTraces equals a build of the whole set, canary for canary, state for state', () => {
    const m = openModelFile('models/stories260K.gguf')
    const prompts = ['Once upon a time', 'The dog ran', 'Lily saw a bird', 'One day, Tom']
    const common = { model: m, seed: 5, tokensPerPrompt: 32, levels: [1, 2, 3] }
    const whole = buildCanaryTraces({ ...common, prompts })
    const grown = extendCanaryTraces(buildCanaryTraces({ ...common, prompts: prompts.slice(0, 2) }), {
      model: m,
      seed: 5,
      prompts
    })
    expect(grown.traces).toHaveLength(4)
    for (let i = 0; i < 4; i++) {
      expect(grown.traces[i].tokens).toEqual(whole.traces[i].tokens)
      for (const k of [1, 2, 3]) expect(grown.traces[i].states[k]).toEqual(whole.traces[i].states[k])
      expect(grown.traces[i].states[0]).toBeUndefined()
    }
    // nothing new: the same traces
    expect(extendCanaryTraces(whole, { model: m, seed: 5, prompts })).toBe(whole)
    m.close()
  })

  it('a longer set continues each canary from its trace (and adds new ones), equal to a whole build, also in slices', async () => {
    const m = openModelFile('models/stories260K.gguf')
    const prompts = ['Once upon a time', 'The dog ran', 'Lily saw a bird']
    const common = { model: m, seed: 7, levels: [0, 2, 5] }
    const whole = buildCanaryTraces({ ...common, prompts, tokensPerPrompt: 80 })
    const short = buildCanaryTraces({ ...common, prompts: prompts.slice(0, 2), tokensPerPrompt: 30 })
    const bits = (a: Float32Array | undefined) => Buffer.from(a!.buffer, a!.byteOffset, a!.byteLength)
    const longer = extendCanaryTraces(short, { model: m, seed: 7, prompts, tokensPerPrompt: 80 })
    const sliced = await extendCanaryTracesInSlices(short, { model: m, seed: 7, prompts, tokensPerPrompt: 80 })
    for (const grown of [longer, sliced]) {
      expect(grown.traces.map((t) => t.tokens.length)).toEqual([80, 80, 80])
      for (let i = 0; i < 3; i++) {
        expect(grown.traces[i].tokens).toEqual(whole.traces[i].tokens)
        expect(grown.traces[i].promptLength).toBe(whole.traces[i].promptLength)
        for (const k of [0, 2, 5]) expect(bits(grown.traces[i].states[k]).equals(bits(whole.traces[i].states[k]))).toBe(true)
      }
    }
    // an abort stops a sliced build between slices
    const ac = new AbortController()
    const stopped = buildCanaryTracesInSlices({ ...common, prompts, tokensPerPrompt: 80 }, { signal: ac.signal })
    ac.abort()
    await expect(stopped).rejects.toThrow()
    m.close()
  })
})
