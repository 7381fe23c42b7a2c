import { InvalidSpeculationError } from '../errors.js'

/**
 * A drafter's guess at the tokens after a context. `probs[i]`, when present, is the distribution
 * the drafter sampled tokens[i] from (speculative sampling needs it); absent, the draft is
 * deterministic: probability 1 on tokens[i].
 */
export interface Draft {
  readonly tokens: number[]
  readonly probs?: Float64Array[]
}

/** Proposes up to `k` tokens to follow `context` (may propose fewer, or none). */
export interface Drafter {
  readonly name: string
  draft(context: readonly number[], k: number): Promise<Draft>
  close(): Promise<void>
}

export interface NgramDrafterOptions {
  /** Longest suffix of the context looked up (tried first). Default 3. */
  readonly maxNgram?: number
  /** Shortest suffix looked up. Default 1. */
  readonly minNgram?: number
  /** Look back at most this many tokens (bounds the cost per step). Default 4096. */
  readonly window?: number
}

/**
 * Prompt lookup decoding (Saxena 2023, "prompt lookup decoding"; the n-gram drafter of
 * llama.cpp's lookup example): find the most recent earlier occurrence of the context's last n
 * tokens (n from maxNgram down to minNgram) and propose the tokens that followed it. No model:
 * it costs a scan of the context, and it wins on text that repeats itself (summaries, code edits,
 * stories that reuse names and phrases).
 */
export function ngramDraft(context: readonly number[], k: number, options: NgramDrafterOptions = {}): number[] {
  const maxN = options.maxNgram ?? 3
  const minN = options.minNgram ?? 1
  const window = options.window ?? 4096
  if (!Number.isInteger(k) || k < 0) throw new InvalidSpeculationError(`draft length must be an integer ≥ 0, got ${k}`)
  if (!Number.isInteger(minN) || !Number.isInteger(maxN) || minN < 1 || maxN < minN)
    throw new InvalidSpeculationError(`n-gram sizes must satisfy 1 ≤ minNgram ≤ maxNgram, got ${minN}..${maxN}`)
  if (!Number.isInteger(window) || window < 2) throw new InvalidSpeculationError(`window must be an integer ≥ 2, got ${window}`)
  // A match near the end leaves a short continuation (in a loop `a b a b` it is one token): the
  // drafts so far become context and the lookup repeats until k tokens or no match.
  const draft: number[] = []
  const extended = [...context]
  while (draft.length < k) {
    const more = lookup(extended, k - draft.length, maxN, minN, window)
    if (more.length === 0) break
    draft.push(...more)
    extended.push(...more)
  }
  return draft
}

/** One lookup: the tokens after the most recent earlier match of the longest suffix (maxN..minN). */
function lookup(context: readonly number[], k: number, maxN: number, minN: number, window: number): number[] {
  const L = context.length
  if (k === 0 || L < 2) return []
  const lo = Math.max(0, L - window)
  for (let n = Math.min(maxN, L - 1); n >= minN; n--) {
    // the pattern is context[L-n, L); a match ends at j+n-1 < L-1 (so something follows it)
    for (let j = L - n - 1; j >= lo; j--) {
      let same = true
      for (let t = 0; t < n; t++) {
        if (context[j + t] !== context[L - n + t]) {
          same = false
          break
        }
      }
      if (!same) continue
      const from = j + n
      return context.slice(from, Math.min(L, from + k)) as number[]
    }
  }
  return []
}

/** The prompt-lookup drafter as a Drafter (deterministic drafts). */
export function createNgramDrafter(options: NgramDrafterOptions = {}): Drafter {
  ngramDraft([], 0, options) // validates the options now, not at the first step
  return {
    name: 'ngram',
    async draft(context, k) {
      return { tokens: ngramDraft(context, k, options) }
    },
    async close() {}
  }
}
