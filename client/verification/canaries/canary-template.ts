import { createRandom, hashSeed, runNow } from '../../../canary/index.js'
import { createTokenizer, type ModelFile, type Tokenizer } from '../../../shards/index.js'

/**
 * How a session's prompt was made from one user message: the gateway's chat template
 * (`(text) => chat.render([{ role: 'user', content: text }])`). A templated real session opens
 * with the template's control tokens and ends its prefill after the assistant header; a canary
 * that is plain text would differ from it in every row a peer sees, so canaries for a client
 * whose sessions are templated are user messages put through the same template.
 */
export type PromptTemplate = (userText: string) => string

/** A template as a session used it: with `special`, its output's control tokens are tokens. */
export interface TemplateUse {
  readonly render: PromptTemplate
  readonly special: boolean
  /** The session's prompt length in tokens: a decoy's prefill must be one a real session had. */
  readonly promptLength: number
}

/** Which secret prompts to make (`from` on: the ones before exist), and the openings seen so far. */
export interface PromptsFromContext {
  readonly from: number
  readonly openings: readonly (readonly number[])[]
  /** Per prompt index, tokens it needs at least (a templated canary's user message), if any. */
  readonly minTokensOf: readonly (number | undefined)[]
}

/** Real prompts whose openings and templates secret canaries draw from: the most recent ones. */
const MAX_SEEN = 256

/**
 * What a client has seen of its real prompts, for its secret canaries to follow: the opening (the
 * first token after BOS) of each plain prompt, and the template of each templated one.
 */
export class PromptHistory {
  private readonly seen: Array<{ readonly opening?: readonly number[]; readonly template?: TemplateUse }> = []

  /**
   * A real prompt's tokens (BOS first where the file adds one). A templated prompt (`template`
   * given) adds its template; a plain one its first token after BOS. A chat template's output
   * without its template (`special` text from elsewhere) adds nothing: its first tokens are the
   * template's, not a user's.
   */
  observe(tokens: readonly number[], bosId: number, o: { special?: boolean; template?: PromptTemplate } = {}): void {
    if (o.template !== undefined) {
      if (typeof o.template !== 'function') throw new TypeError('a prompt template is a function of the user text')
      this.seen.push({ template: { render: o.template, special: o.special === true, promptLength: tokens.length } })
    } else {
      if (o.special) return
      const first = tokens[0] === bosId ? 1 : 0
      if (tokens.length <= first) return
      this.seen.push({ opening: [tokens[first]] })
    }
    if (this.seen.length > MAX_SEEN) this.seen.shift()
  }

  /** Openings of the plain prompts seen (token ids after BOS), oldest first. */
  openings(): number[][] {
    return this.seen.flatMap((s) => (s.opening ? [[...s.opening]] : []))
  }

  /**
   * Canary prompt `index` of a set: put through the template of a real session drawn at random
   * (secret `seed`, so a peer cannot tell which) when that session was templated, as often as
   * the client's sessions are; plain otherwise. Fixed once made: a grown set keeps its first ones.
   */
  templateFor(seed: number, index: number): TemplateUse | undefined {
    if (this.seen.length === 0) return undefined
    const draw = createRandom(hashSeed(seed, `canary-template-${index}`)).next()
    return this.seen[Math.floor(draw * this.seen.length)].template
  }
}

/**
 * A user message cut from `raw` (at a token boundary) so that the template renders it to exactly
 * the real session's prompt length, as a decoy's prefill must be (canary/mixing.ts plans only
 * prefills real sessions had); as near as `raw` allows when it is too short.
 */
export function fitTemplate(raw: string, use: TemplateUse, tokenizer: Tokenizer): string {
  const u = tokenizer.encode(raw, { bos: false, eos: false })
  const text = (k: number): string => use.render(tokenizer.decode(u.slice(0, k)).trim())
  const lengthOf = (k: number): number => tokenizer.encode(text(k), { special: use.special }).length
  const clamp = (k: number): number => Math.max(1, Math.min(u.length, k))
  let k = clamp(use.promptLength - lengthOf(0))
  for (let tries = 0; tries < 8; tries++) {
    const n = lengthOf(k)
    if (n === use.promptLength) break
    const next = clamp(k + use.promptLength - n)
    if (next === k) break
    k = next
  }
  return text(k)
}

/**
 * Secret prompts `from` to `count`: each plain or, as often as the client's sessions were,
 * put through a real session's template and cut to that session's prompt length. `templated`:
 * per prompt made, how a template made it (undefined: plain).
 */
export function secretPromptsFollowing(
  history: PromptHistory,
  model: ModelFile,
  promptsFrom: (count: number, more: PromptsFromContext) => readonly string[],
  o: { readonly count: number; readonly from: number; readonly seed: number }
): { texts: string[]; templated: ({ special: boolean } | undefined)[] } {
  return runNow(secretPromptsFollowingJob(history, model, (count, more) => once(promptsFrom(count, more)), o))
}

/** secretPromptsFollowing with the prompts made by a sliced job (canary/background-job.ts). */
export function* secretPromptsFollowingJob(
  history: PromptHistory,
  model: ModelFile,
  promptsJob: (count: number, more: PromptsFromContext) => Generator<void, readonly string[]>,
  o: { readonly count: number; readonly from: number; readonly seed: number; readonly tokenizer?: Tokenizer }
): Generator<void, { texts: string[]; templated: ({ special: boolean } | undefined)[] }> {
  const uses = Array.from({ length: o.count }, (_, i) => (i < o.from ? undefined : history.templateFor(o.seed, i)))
  // a templated prompt's user message is cut to fit its session's length: sample at least that
  const minTokensOf = uses.map((u) => u?.promptLength)
  const texts = yield* promptsJob(o.count, { from: o.from, openings: history.openings(), minTokensOf })
  const tokenizer = model.vocabulary && uses.some((u) => u) ? (o.tokenizer ?? createTokenizer(model.vocabulary)) : undefined
  const mine = uses.slice(o.from)
  return {
    texts: texts.map((text, k) => (mine[k] && tokenizer ? fitTemplate(text, mine[k], tokenizer) : text)),
    templated: mine.map((u) => u && { special: u.special })
  }
}

// biome-ignore lint/correctness/useYield: a job of no slices (prompts made at once)
function* once<T>(value: T): Generator<void, T> {
  return value
}
