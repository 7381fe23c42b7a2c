import { createSampler, type GenerateInit, InvalidArgumentError, Xorshift64 } from '../../shards/index.js'
import type { Drafter } from './draft-ngram.js'
import { acceptOrResample, sampleFrom, targetProbs } from './speculative-accept.js'
import { DraftLength, type DraftLengthOptions } from './speculative-k.js'

/**
 * What a speculative step tells the pipeline beside its signal: only the first `committedRows`
 * rows of the step are final (the token sampled from verified logits); the drafted rows after it
 * may be rewound by the next step, so sealed snapshots stop before them (remote-pipeline.ts).
 */
export interface SpeculativeStepOptions {
  readonly signal?: AbortSignal
  readonly committedRows?: number
  /** The draft length the step asked for (decoys copy it: client/verification/canary-decoy-speculative.ts). */
  readonly draftLength?: number
}

/** Counters of one speculative generation (for benchmarks and logs). */
export interface SpeculationStats {
  /** Steps after the prefill. */
  steps: number
  /** Drafted tokens sent for verification, and how many were kept. */
  drafted: number
  accepted: number
  /** Tokens generated (kept drafts + one sampled per step + the prefill's). */
  tokens: number
  draftMs: number
}

export function emptySpeculationStats(): SpeculationStats {
  return { steps: 0, drafted: 0, accepted: 0, tokens: 0, draftMs: 0 }
}

export interface SpeculativeInit extends GenerateInit {
  readonly drafter: Drafter
  readonly draftLength?: DraftLengthOptions
  /** Filled in as the generation runs. */
  readonly stats?: SpeculationStats
}

/**
 * generateTokens with speculative steps (issue 18 item 1): after the prefill, each step sends the
 * last sampled token followed by K drafted tokens as one step of K+1 rows at the next position,
 * through every hop. Row i's logits predict the token after row i, so the drafts are checked in
 * order: greedy keeps a draft while it equals the sampler's choice (the same sampler call as
 * generateTokens, so the tokens are identical to one process's); with sampling, the speculative
 * sampling rule keeps the target distribution (speculative-accept.ts). The first rejected position
 * gets the target's own token (the correction), and when every draft is kept the last row gives
 * one more token. The next step starts right after the kept tokens, so every hop, and the client's
 * edge blocks, rewind the rejected positions (Shard.forward rewinds a start before its length).
 */
export async function* speculativeTokens(init: SpeculativeInit): AsyncGenerator<number> {
  const { edge, pipeline, promptTokens, maxTokens, signal, drafter } = init
  if (promptTokens.length === 0) throw new InvalidArgumentError('the prompt must hold at least one token (BOS)')
  if (!Number.isInteger(maxTokens) || maxTokens < 0)
    throw new InvalidArgumentError(`maxTokens must be an integer ≥ 0, got ${maxTokens}`)
  if (maxTokens === 0) return
  const stats = init.stats ?? emptySpeculationStats()
  const greedy = (init.temperature ?? 1) === 0
  // greedy: the sampler generateTokens uses (it draws no random numbers at temperature 0)
  const sampler = createSampler(init)
  const rng = new Xorshift64(init.seed ?? 0)
  const stop = new Set(init.stopIds ?? [])
  const history = [...promptTokens]
  const k = new DraftLength(init.draftLength)
  const maxLength = promptTokens.length + maxTokens

  signal?.throwIfAborted()
  const prefill = await pipeline.forward(edge.embed(promptTokens), 0, { signal })
  let pos = promptTokens.length
  const first = edge.lastLogits(prefill, promptTokens.length)
  init.onLogits?.(first, pos - 1)
  let last = greedy ? sampler.sample(first, history) : sampleFrom(targetProbs(first, history, init), rng)
  if (stop.has(last)) return
  history.push(last)
  stats.tokens++
  yield last
  let produced = 1
  // `last` sits at position `pos`, not yet run through the model
  while (produced < maxTokens) {
    signal?.throwIfAborted()
    // K+1 rows at pos..pos+K must fit the session, and at most maxTokens-produced tokens are wanted
    const limit = Math.min(maxTokens - produced - 1, maxLength - pos - 1)
    const t0 = performance.now()
    const want = limit > 0 ? k.next(limit) : 0
    const draft = want > 0 ? await drafter.draft(history, want) : { tokens: [] }
    const drafts = draft.tokens.slice(0, Math.max(0, limit))
    const draftMs = performance.now() - t0
    const input = [last, ...drafts]
    const step: SpeculativeStepOptions = { signal, committedRows: 1, draftLength: want }
    const out = await pipeline.forward(edge.embed(input), pos, step)
    const logits = edge.logits(out, input.length)
    const vocab = logits.length / input.length
    let kept = 0
    let next = -1
    for (let i = 0; i < input.length; i++) {
      const row = logits.subarray(i * vocab, (i + 1) * vocab)
      init.onLogits?.(row, pos + i)
      if (greedy) next = sampler.sample(row, history)
      else {
        const p = targetProbs(row, history, init)
        next = i < drafts.length ? acceptOrResample(p, drafts[i], draft.probs?.[i], rng).token : sampleFrom(p, rng)
      }
      // the rows after i hold the right inputs exactly when the token here is the drafted one
      const match = i < drafts.length && next === drafts[i]
      if (match) kept++
      if (stop.has(next)) return
      history.push(next)
      produced++
      stats.tokens++
      yield next
      if (produced >= maxTokens || !match) break
    }
    stats.steps++
    stats.drafted += drafts.length
    stats.accepted += kept
    stats.draftMs += draftMs
    k.observeDraft(drafts.length, kept)
    k.observeStep(input.length, performance.now() - t0 - draftMs, draftMs, drafts.length)
    pos += kept + 1
    last = next
  }
}
