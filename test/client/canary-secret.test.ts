import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DEFAULT_CANARY_PROMPTS } from '../../canary/index.js'
import { InvalidCanarySecretError } from '../../client/errors.js'
import { loadOrCreateSecret, randomSecret, secretPrompts, secretSeed } from '../../client/verification/canaries/canary-secret.js'
import { CanaryMaterial } from '../../client/verification/canary-decoys.js'
import { createReferenceKernels, createTokenizer, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

const model = openModelFile(GGUF_PATH)
const kernels = createReferenceKernels()

function materialFor(secret: Uint8Array): CanaryMaterial {
  return new CanaryMaterial(model, {
    kernels,
    promptsFrom: (count, more) => secretPrompts(model, secret, { count, kernels, ...more }),
    count: 4,
    seed: secretSeed(secret, 'traces'),
    length: 48,
    maxLength: 48
  })
}

describe('secret canaries (issue 16)', () => {
  it('keeps the secret owner-only in its file, made once and read back', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'layerswarm-secret-')), 'state', 'canary-secret')
    const a = loadOrCreateSecret(path)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(a.length).toBe(32)
    expect(loadOrCreateSecret(path)).toEqual(a)
    writeFileSync(path, 'not a secret')
    expect(() => loadOrCreateSecret(path)).toThrow(InvalidCanarySecretError)
  })

  it('derives seeds from the secret only: other secrets, other seeds; labels separate uses', () => {
    const s = randomSecret()
    expect(secretSeed(s, 'traces')).toBe(secretSeed(new Uint8Array(s), 'traces'))
    expect(secretSeed(s, 'traces')).not.toBe(secretSeed(s, 'mixing'))
    expect(secretSeed(s, 'traces')).not.toBe(secretSeed(randomSecret(), 'traces'))
    expect(Number.isSafeInteger(secretSeed(s, 'x') * 1000 + 999)).toBe(true)
    expect(() => secretSeed(new Uint8Array(4), 'x')).toThrow(InvalidCanarySecretError)
  })

  it("a client's canary inputs are its own: not the built-in prompts, and no other secret regenerates them", {
    timeout: 60_000
  }, () => {
    const secret = randomSecret()
    const prompts = secretPrompts(model, secret, { count: 6, kernels })
    expect(prompts).toHaveLength(6)
    for (const p of prompts) expect(DEFAULT_CANARY_PROMPTS).not.toContain(p)
    // random lengths, random starts: not all the same opening or the same length
    expect(new Set(prompts.map((p) => p.split(' ')[0])).size).toBeGreaterThan(1)
    expect(new Set(prompts.map((p) => p.length)).size).toBeGreaterThan(1)
    expect(secretPrompts(model, secret, { count: 6, kernels })).toEqual(prompts)
    const mine = materialFor(secret).setFor(1)
    const again = materialFor(secret).setFor(1)
    const other = materialFor(randomSecret()).setFor(1)
    expect(again.canaries[0].inputs).toEqual(mine.canaries[0].inputs)
    for (let i = 0; i < mine.canaries.length; i++) expect(other.canaries[i].inputs).not.toEqual(mine.canaries[i].inputs)
  })

  it('cuts prompts from a user corpus when given one: from the start of a paragraph, of random lengths', () => {
    const corpus = readFileSync(join(import.meta.dirname, '..', '..', 'models', 'README.md'), 'utf8').split(/\n\s*\n/)
    const flat = corpus.map((t) => t.trim().replace(/\s+/g, ' '))
    const prompts = secretPrompts(model, randomSecret(), { count: 12, corpus })
    // each paragraph is an example of a prompt: real prompts open a text
    for (const p of prompts) expect(flat.some((t) => t.startsWith(p))).toBe(true)
    expect(new Set(prompts.map((p) => p.split(' ').length)).size).toBeGreaterThan(1)
  })

  it('makes prompt i the same whatever the others: `from` skips the first ones, as a growing set asks', () => {
    const secret = randomSecret()
    const all = secretPrompts(model, secret, { count: 5, kernels })
    expect(secretPrompts(model, secret, { count: 5, from: 3, kernels })).toEqual(all.slice(3))
    expect(secretPrompts(model, secret, { count: 5, from: 5, kernels })).toEqual([])
    expect(() => secretPrompts(model, secret, { count: 5, from: 6, kernels })).toThrow(InvalidCanarySecretError)
  })

  it("opens sampled prompts as the client's real prompts open, once it has seen some", () => {
    const tokenizer = createTokenizer(model.vocabulary!)
    const m = materialFor(randomSecret())
    for (const text of ['Once upon a time, there was a frog.', 'One day, a dog ran home.'])
      m.observePrompt(tokenizer.encode(text, { bos: true }), tokenizer.bosId)
    const prompts = m.setFor(1).canaries.map((c) => tokenizer.decode(c.tokens.slice(1, 2)).trim())
    expect(prompts).toHaveLength(4)
    for (const first of prompts) expect(['Once', 'One']).toContain(first)
    // without openings, prompts start wherever the model's text opens a sentence
    const free = materialFor(new Uint8Array(32).fill(3))
      .setFor(1)
      .canaries.map((c) => tokenizer.decode(c.tokens.slice(1, 2)).trim())
    expect(free.some((w) => w !== 'Once' && w !== 'One')).toBe(true)
  })
})
