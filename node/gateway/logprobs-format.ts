import type { Tokenizer, TokenLogprobs } from '../../shards/index.js'

/** OpenAI's logprobs shapes, from the client's own log-probabilities (shards/constrain/logprobs.ts). */
const text = new TextDecoder('utf-8')

function tokenText(tok: Tokenizer, id: number): { token: string; bytes: number[] } {
  const b = tok.tokenBytes(id)
  // control tokens decode to nothing: name them as the vocabulary does
  return b.length === 0 ? { token: tok.pieceOf(id), bytes: [] } : { token: text.decode(b), bytes: [...b] }
}

/** Chat: `choices[].logprobs.content`. */
export function chatLogprobs(tok: Tokenizer, lps: readonly TokenLogprobs[]) {
  return lps.map((lp) => ({
    ...tokenText(tok, lp.token),
    logprob: lp.logprob,
    top_logprobs: lp.top.map((t) => ({ ...tokenText(tok, t.token), logprob: t.logprob }))
  }))
}

/** Completions: `choices[].logprobs` (tokens, token_logprobs, top_logprobs, text_offset). */
export function completionLogprobs(tok: Tokenizer, lps: readonly TokenLogprobs[], offset = 0) {
  const tokens = lps.map((lp) => tokenText(tok, lp.token).token)
  const textOffset: number[] = []
  let at = offset
  for (const t of tokens) {
    textOffset.push(at)
    at += t.length
  }
  return {
    tokens,
    token_logprobs: lps.map((lp) => lp.logprob),
    top_logprobs: lps.map((lp) => Object.fromEntries(lp.top.map((t) => [tokenText(tok, t.token).token, t.logprob]))),
    text_offset: textOffset
  }
}
