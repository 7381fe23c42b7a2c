import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { secretPrompts, secretSeed } from '../../client/verification/canaries/canary-secret.js'
import { PromptHistory } from '../../client/verification/canaries/canary-template.js'
import { CanaryMaterial } from '../../client/verification/canary-decoys.js'
import { type ChatFormatter, createChatFormatter } from '../../node/gateway/chat-template.js'
import { createReferenceKernels, createTokenizer, type ModelFile, openModelFile, type Tokenizer } from '../../shards/index.js'
import { writeQwenVocabModel } from '../helpers/qwen-vocab-model.js'

/*
 * Issue 16: a client whose sessions go through a chat template (the gateway's chat endpoint)
 * sends canaries that do too. A real templated session opens with the template's control tokens
 * and its prefill ends after the assistant header; plain-text canaries would differ from it in
 * every row a peer sees. A small random model with Qwen 3's vocabulary and chat template.
 */
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-canary-template-'))
const path = join(dir, 'qwen3-vocab.gguf')
const kernels = createReferenceKernels()
const secret = new Uint8Array(32).fill(9)
let model: ModelFile
let tokenizer: Tokenizer
let chat: ChatFormatter

beforeAll(() => {
  writeQwenVocabModel(path, { layers: 2, seed: 5, seqLen: 96 })
  model = openModelFile(path)
  tokenizer = createTokenizer(model.vocabulary!)
  chat = createChatFormatter({
    template: model.metadata.get('tokenizer.chat_template') as string,
    bosToken: '',
    eosToken: tokenizer.pieceOf(tokenizer.eosId),
    addsBos: false
  })
}, 120_000)

afterAll(() => {
  model?.close()
  rmSync(dir, { recursive: true, force: true })
})

function material(count: number): CanaryMaterial {
  return new CanaryMaterial(model, {
    kernels,
    promptsFrom: (n, more) => secretPrompts(model, secret, { count: n, kernels, ...more }),
    count,
    seed: secretSeed(secret, 'traces'),
    length: 64,
    maxLength: 64
  })
}

const render = (text: string): string => chat.render([{ role: 'user', content: text }])

describe('canaries of templated sessions (issue 16)', () => {
  it('go through the chat template: control tokens first, as long as the session, the prefill to the assistant header', () => {
    const m = material(4)
    const real = tokenizer.encode(render('Tell me a story about a cat.'), { special: true })
    m.observePrompt(real, tokenizer.bosId, { special: true, template: render })
    const set = m.setFor(1)
    const head = tokenizer.encode('<|im_start|>user\n', { special: true })
    const tail = tokenizer.encode('<|im_end|>\n<|im_start|>assistant\n', { special: true })
    expect(head[0]).toBe(real[0]) // one control token, as the real session's
    for (const c of set.canaries) {
      // cut to the real session's prompt length: a decoy's prefill must be one a real session had
      expect(c.promptLength).toBe(real.length)
      expect(c.tokens.slice(0, head.length)).toEqual(head)
      expect(c.tokens.slice(c.promptLength - tail.length, c.promptLength)).toEqual(tail)
    }
    // a decoy copies a real session's shape; its prefill ends where a templated prompt does
    m.observeStep({ forwarding: 'relay', maxLength: 64, sessionId: 'r', startPosition: 0, rows: real.length }, 'f32')
    m.observeStep({ forwarding: 'relay', maxLength: 64, sessionId: 'r', startPosition: real.length, rows: 1 }, 'f32')
    m.endSession('r')
    for (let i = 0; i < 4; i++) {
      const plan = m.plan(1, { forwarding: 'relay', maxLength: 64 })
      expect(plan.steps[0].rows).toBe(real.length)
    }
  }, 120_000)

  it('as often as the sessions are templated, and never a plain session', () => {
    const plain = new PromptHistory()
    plain.observe(tokenizer.encode('Once upon a time'), tokenizer.bosId)
    for (let i = 0; i < 16; i++) expect(plain.templateFor(7, i)).toBeUndefined()
    const mixed = new PromptHistory()
    mixed.observe(tokenizer.encode('Once upon a time'), tokenizer.bosId)
    mixed.observe(tokenizer.encode(render('Hi'), { special: true }), tokenizer.bosId, { special: true, template: render })
    const used = Array.from({ length: 64 }, (_, i) => mixed.templateFor(7, i) !== undefined)
    const share = used.filter(Boolean).length / used.length
    expect(share).toBeGreaterThan(0.25)
    expect(share).toBeLessThan(0.75)
    // a chat template's output seen without its template adds no opening (its first token is the template's)
    const blind = new PromptHistory()
    blind.observe(tokenizer.encode(render('Hi'), { special: true }), tokenizer.bosId, { special: true })
    expect(blind.openings()).toEqual([])
    const once = tokenizer.encode('Once upon a time')
    expect(mixed.openings()).toEqual([[once[once[0] === tokenizer.bosId ? 1 : 0]]])
  })
})
