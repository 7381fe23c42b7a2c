/**
 * Log-probabilities from the client's own logits (issue 37: OpenAI `logprobs`/`top_logprobs`):
 * log-softmax in float64 over the logits the model gave, before any grammar mask, temperature
 * or top-p, as OpenAI reports them.
 */
export interface TokenLogprobs {
  readonly token: number
  readonly logprob: number
  /** The likeliest tokens at this step, most likely first (as many as asked). */
  readonly top: ReadonlyArray<{ readonly token: number; readonly logprob: number }>
}

/** Log-sum-exp of the logits and the `top` likeliest (token, logprob) pairs. */
export function logprobStats(logits: Float32Array, top: number): { lse: number; top: Array<{ token: number; logprob: number }> } {
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i]
  let sum = 0
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max)
  const lse = max + Math.log(sum)
  // a small sorted list beats sorting 152k entries
  const best: Array<{ token: number; logprob: number }> = []
  if (top > 0) {
    for (let i = 0; i < logits.length; i++) {
      const v = logits[i]
      if (best.length === top && v <= best[top - 1].logprob) continue
      let j = best.length < top ? best.length : top - 1
      if (best.length < top) best.push({ token: i, logprob: v })
      while (j > 0 && best[j - 1].logprob < v) {
        best[j] = best[j - 1]
        j--
      }
      best[j] = { token: i, logprob: v }
    }
  }
  return { lse, top: best.map((b) => ({ token: b.token, logprob: b.logprob - lse })) }
}
