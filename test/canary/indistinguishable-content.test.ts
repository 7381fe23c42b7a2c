import { describe, expect, it } from 'vitest'
import { auroc, DEFAULT_CANARY_PROMPTS, HELD_OUT_PROMPTS } from '../../canary/index.js'
import { createTracer } from '../../canary/trace.js'
import { CanaryMaterial } from '../../client/canary-decoys.js'
import { secretPrompts, secretSeed } from '../../client/index.js'
import { createEdge, createReferenceKernels, createTokenizer, openModelFile } from '../../shards/index.js'
import { trainLogistic } from '../helpers/logistic.js'

/*
 * Issue 16: a peer that knows the code and the model but not the client's secret cannot tell
 * canaries from real steps by their content. A classifier (logistic regression, test/helpers)
 * is trained on what a peer sees of a session: where it holds block 0 the decoded tokens (their
 * likelihood under the model, prompt and continuation, the first token after BOS, vocabulary
 * statistics), otherwise the hidden states (row norms and peaks). Real sessions are TinyStories-
 * like prompts continued at temperature 1 (the CLI's, SDK's and gateway's default); decoys are
 * what the client sends: secret canaries (client/canary-secret.ts) on plans copying the real
 * sessions' shapes (client/canary-decoys.ts). On a held-out set the classifier must stay at chance.
 */
const model = openModelFile('models/stories260K.gguf')
const kernels = createReferenceKernels()
const tokenizer = createTokenizer(model.vocabulary!)
const edge = createEdge({ model, kernels })
const n = model.config.nLayers
const dim = model.config.dim
const GEN = 24
/** A fixed test secret (the peer under test does not know it). */
const secret = new Uint8Array(32).map((_, i) => (i * 37 + 11) & 0xff)

interface View {
  readonly tokens: readonly number[]
  readonly prefill: number
  /** Hidden states entering block 1 (what a peer at block 1 sees), and after the last block. */
  readonly level1: Float32Array
  readonly top: Float32Array
}

function nlls(v: View): number[] {
  const T = v.tokens.length
  const logits = edge.logits(v.top, T)
  const V = model.config.vocabSize
  const out: number[] = []
  for (let p = 1; p < T; p++) {
    const row = logits.subarray((p - 1) * V, p * V)
    let max = Number.NEGATIVE_INFINITY
    for (const x of row) max = Math.max(max, x)
    let sum = 0
    for (const x of row) sum += Math.exp(x - max)
    out.push(Math.log(sum) + max - row[v.tokens[p]])
  }
  return out
}

const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length)

/** A block-0 peer decodes the tokens (its inputs are embeddings) and scores them with the model. */
function tokenFeatures(v: View): number[] {
  const nll = nlls(v)
  const prefill = nll.slice(0, v.prefill - 1)
  return [
    mean(prefill),
    nll[0],
    mean(nll.slice(v.prefill - 1)),
    new Set(v.tokens).size / v.tokens.length,
    mean(v.tokens.map((t) => Math.log(1 + t))),
    v.prefill
  ]
}

/** A later peer sees hidden states: their row norms and peaks, prompt and continuation apart. */
function activationFeatures(v: View): number[] {
  const T = v.tokens.length
  const norms: number[] = []
  const peaks: number[] = []
  for (let p = 0; p < T; p++) {
    const row = v.level1.subarray(p * dim, (p + 1) * dim)
    norms.push(Math.sqrt(row.reduce((s, x) => s + x * x, 0)))
    peaks.push(row.reduce((m, x) => Math.max(m, Math.abs(x)), 0))
  }
  const m = mean(norms.slice(1))
  return [
    mean(norms.slice(1, v.prefill)),
    norms[1] ?? 0,
    mean(norms.slice(v.prefill)),
    Math.sqrt(mean(norms.slice(1).map((x) => (x - m) ** 2))),
    mean(peaks.slice(1)),
    v.prefill
  ]
}

function realViews(prompts: readonly string[], seeds: number): View[] {
  const tracer = createTracer(model, kernels, tokenizer)
  const views: View[] = []
  try {
    for (let s = 0; s < seeds; s++) {
      for (const [i, text] of prompts.entries()) {
        const promptLength = tokenizer.encode(text, { bos: true }).length
        const levels = new Set([1, n])
        const t = tracer.trace({ text, length: promptLength + GEN, maxPromptTokens: 64, seed: 9000 + 100 * s + i, levels })
        views.push({ tokens: t.tokens, prefill: t.promptLength, level1: t.states[1]!, top: t.states[n]! })
      }
    }
  } finally {
    tracer.close()
  }
  return views
}

function decoyViews(real: readonly View[], corpus?: readonly string[]): View[] {
  const material = new CanaryMaterial(model, {
    kernels,
    promptsFrom: () => secretPrompts(model, secret, { count: real.length, kernels, corpus }),
    seed: secretSeed(secret, 'traces'),
    length: 64,
    maxLength: 64
  })
  // the client's real sessions go by: decoys copy their shapes (prefill rows, steps)
  for (const [i, v] of real.entries()) {
    const ctx = { forwarding: 'relay' as const, maxLength: 64, sessionId: `real-${i}` }
    material.observeStep({ ...ctx, startPosition: 0, rows: v.prefill }, 'f32')
    for (let s = 0; s < GEN; s++) material.observeStep({ ...ctx, startPosition: v.prefill + s, rows: 1 }, 'f32')
    material.endSession(`real-${i}`)
  }
  const set = material.setFor(0)
  return Array.from({ length: real.length }, () => {
    const plan = material.plan(0, { forwarding: 'relay', maxLength: 64 })
    const last = plan.steps.at(-1)!
    const T = last.startPosition + last.rows
    const c = set.canaries[plan.canaryIndex]
    return { tokens: c.tokens.slice(0, T), prefill: plan.steps[0].rows, level1: c.outputs[0], top: c.outputs[n - 1] }
  })
}

/**
 * Held-out AUROC of a classifier of real sessions against decoys on `features`: trained on the
 * real sessions of the first half of the prompts and the first half of the decoys, tested on the rest.
 */
function heldOutAuroc(real: readonly View[], decoys: readonly View[], prompts: number, features: (v: View) => number[]): number {
  const isTrain = (i: number, xs: readonly View[]): boolean => (xs === real ? i % prompts < prompts / 2 : i < xs.length / 2)
  const part = (xs: readonly View[], train: boolean): View[] => xs.filter((_, i) => isTrain(i, xs) === train)
  const clf = trainLogistic([...part(real, true), ...part(decoys, true)].map(features), [
    ...part(real, true).map(() => 0),
    ...part(decoys, true).map(() => 1)
  ])
  const score = auroc(
    part(decoys, false).map((v) => clf.predict(features(v))),
    part(real, false).map((v) => clf.predict(features(v)))
  )
  return Math.max(score, 1 - score) // a classifier that ranks backwards tells them apart as well
}

const VIEWS = [
  ['decoded tokens (a peer holding block 0)', tokenFeatures],
  ['hidden states (a peer holding a later block)', activationFeatures]
] as const

/*
 * Measured (fixed secret and seeds, so the numbers are reproducible): the decoded-token view is at
 * chance in both modes and asserted; the hidden-state view is NOT yet (held-out AUROC 0.66 with a
 * corpus, 0.77 with sampled canaries against human-written prompts: the row norms of the prefill
 * tell a 260K-parameter model's text from human text). It is logged, not asserted, until fixed
 * (docs/verification.md, "What this does not protect").
 */
describe('canary content is indistinguishable from real sessions (issue 16)', () => {
  for (const mode of ['corpus', 'sampled'] as const) {
    it(`${mode === 'corpus' ? 'canaries cut from a corpus of texts like the real prompts (--canary-corpus)' : 'canaries the model samples (the default)'}: decoded tokens at chance (AUROC ≤ 0.6)`, () => {
      // corpus: the user's corpus and their real prompts are different texts of one kind
      const prompts = mode === 'corpus' ? HELD_OUT_PROMPTS : [...DEFAULT_CANARY_PROMPTS, ...HELD_OUT_PROMPTS]
      const real = realViews(prompts, mode === 'corpus' ? 6 : 3)
      const decoys = decoyViews(real, mode === 'corpus' ? DEFAULT_CANARY_PROMPTS : undefined)
      const scores = VIEWS.map(([view, features]) => {
        const score = Number(heldOutAuroc(real, decoys, prompts.length, features).toFixed(3))
        console.log(JSON.stringify({ canaries: mode, view, heldOutAuroc: score }))
        return score
      })
      expect(scores[0]).toBeLessThanOrEqual(0.6)
    })
  }
})
