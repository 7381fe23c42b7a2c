import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  buildCanaryTraces,
  CanaryBankKeyError,
  CanaryBankLevelError,
  CanaryBankLockedError,
  CanaryBankMismatchError,
  CorruptCanaryBankError,
  canaryBankModelId,
  canarySetFromTraces,
  driftMetrics,
  inputFor,
  loadBankKey,
  loadCanaryBank,
  loadOrCreateBankKey,
  referenceFor,
  saveCanaryBank
} from '../../canary/index.js'
import { BlockNotHeldError, edgeOnlyModel, openCanaryBank } from '../../client/index.js'
import { CanaryMaterial } from '../../client/verification/canary-decoys.js'
import { computeModelId, createShard, openModelFile } from '../../shards/index.js'

const model = openModelFile('models/stories260K.gguf')
const modelId = computeModelId(model)
const traces = buildCanaryTraces({
  model,
  prompts: ['Once upon a time, there was a little cat.', 'Tom went to the park.'],
  tokensPerPrompt: 24,
  maxPromptTokens: 10,
  seed: 7
})
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-bank-'))

describe('canary bank (sealed traces for thin clients)', () => {
  it('round-trips every level of every canary under its key, owner-only on disk', () => {
    const key = loadOrCreateBankKey(join(dir, 'keys', 'canary-bank-key'))
    expect(statSync(join(dir, 'keys', 'canary-bank-key')).mode & 0o777).toBe(0o600)
    expect(loadBankKey(join(dir, 'keys', 'canary-bank-key'))).toEqual(key)
    const path = join(dir, 'bank')
    saveCanaryBank(path, traces, key)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    // sealed: neither the canary text nor the tokens are readable in the file
    expect(readFileSync(path).includes(Buffer.from('little cat'))).toBe(false)
    expect(canaryBankModelId(path)).toBe(modelId)
    const back = loadCanaryBank(path, key, { modelId })
    expect(back.traces.map((t) => t.tokens)).toEqual(traces.traces.map((t) => t.tokens))
    for (let i = 0; i < traces.traces.length; i++) {
      for (let k = 0; k <= model.config.nLayers; k++) expect(back.traces[i].states[k]).toEqual(traces.traces[i].states[k])
    }
    // its references are what a plain shard computes (as for a set the client builds itself)
    const set = canarySetFromTraces(back, 1, [4])
    const shard = createShard({ model, start: 1, end: 4 })
    shard.openSession('x', { maxLength: 24 })
    for (let p = 0; p < 24; p++) {
      expect(driftMetrics(shard.forward('x', inputFor(set, 0, p), p), referenceFor(set, 0, 4, p)).relL2).toBe(0)
    }
    shard.close()
  })

  it('refuses another key, an altered byte, another model, a file that is not a bank, and a bad key file', () => {
    const key = loadOrCreateBankKey(join(dir, 'k2'))
    const path = join(dir, 'bank2')
    saveCanaryBank(path, traces, key)
    const other = new Uint8Array(32).fill(7)
    expect(() => loadCanaryBank(path, other)).toThrow(CanaryBankLockedError)
    const buf = readFileSync(path)
    buf[buf.length - 100] ^= 1
    writeFileSync(join(dir, 'altered'), buf)
    expect(() => loadCanaryBank(join(dir, 'altered'), key)).toThrow(CanaryBankLockedError)
    // the public model id is bound too (associated data): changing it breaks the tag
    const forged = Buffer.from(
      readFileSync(path)
        .toString('latin1')
        .replace(modelId, `${modelId.slice(0, -1)}0`),
      'latin1'
    )
    writeFileSync(join(dir, 'forged'), forged)
    expect(() => loadCanaryBank(join(dir, 'forged'), key)).toThrow(CanaryBankLockedError)
    expect(() => loadCanaryBank(path, key, { modelId: 'lsm1-other' })).toThrow(CanaryBankMismatchError)
    writeFileSync(join(dir, 'junk'), 'hello world, not a bank at all')
    expect(() => loadCanaryBank(join(dir, 'junk'), key)).toThrow(CorruptCanaryBankError)
    writeFileSync(join(dir, 'badkey'), 'xyz\n')
    expect(() => loadBankKey(join(dir, 'badkey'))).toThrow(CanaryBankKeyError)
    expect(() => saveCanaryBank(path, traces, new Uint8Array(16))).toThrow(CanaryBankKeyError)
  })

  it("a thin client's material takes every decoy from the bank and reads no middle block", () => {
    const key = loadOrCreateBankKey(join(dir, 'k3'))
    saveCanaryBank(join(dir, 'bank3'), traces, key)
    const bank = openCanaryBank({ path: join(dir, 'bank3'), key }, modelId)
    const thin = edgeOnlyModel(model, 1, 4)
    expect(() => thin.readMatrix('blk.2.attn_q')).toThrow(BlockNotHeldError)
    expect(() => thin.readVector('blk.1.attn_norm')).toThrow(BlockNotHeldError)
    expect(thin.readVector('blk.0.attn_norm')).toBeInstanceOf(Float32Array)
    expect(thin.readVector('blk.4.ffn_norm')).toBeInstanceOf(Float32Array)
    const material = new CanaryMaterial(thin, { bank, maxLength: 64 })
    expect(material.length).toBe(24)
    const set = material.setFor(1)
    expect(set.canaries[0].inputs).toBe(bank.traces[0].states[1])
    expect(set.ends).toEqual([2, 3, 4, 5])
    // a bank without a level the route needs says so (no silent rebuild on the thin model)
    const partial = {
      ...bank,
      traces: bank.traces.map((t) => ({ ...t, states: t.states.map((s, k) => (k === 2 ? undefined : s)) }))
    }
    expect(() => new CanaryMaterial(thin, { bank: partial, maxLength: 64 }).setFor(2)).toThrow(CanaryBankLevelError)
  })
})
