import type { ModelFile } from '../../../shards/index.js'
import { PromptHistory, secretPromptsFollowing, secretPromptsFollowingJob } from './canary-template.js'
import type { CanaryTraceStoreOptions } from './canary-trace-store-options.js'

/**
 * The secret canary prompts a trace store (client/verification/canaries/canary-trace-store.ts) builds on:
 * how many the set holds, those made so far (made by the store's `promptsFrom`, or `promptsJob`
 * in the background, to follow the client's real prompts: client/verification/canaries/canary-template.ts),
 * which of them a chat template made, and how the set grows.
 */
export class SecretCanaryPrompts {
  /** The client's real prompts as secret canaries follow them (openings, chat templates). */
  readonly history = new PromptHistory()
  /** Per prompt made: made by a chat template (then kept whole; `special`: control tokens). */
  readonly templated: ({ special: boolean } | undefined)[] = []
  private made?: readonly string[]
  /** Canaries of the secret set (grown when a peer has been sent every one). */
  count: number

  constructor(
    private readonly model: ModelFile,
    private readonly o: Pick<CanaryTraceStoreOptions, 'count' | 'promptsFrom' | 'promptsJob' | 'seed' | 'tokenizer'>
  ) {
    this.count = o.count ?? 8
  }

  /** The prompts made so far (fixed from then on; a growth appends). */
  get texts(): readonly string[] | undefined {
    return this.made
  }

  /** A returning client's kept set: its prompts stay prompts 0..k of the secret set, and it grows from there. */
  keep(texts: readonly string[]): void {
    this.made = texts
    this.count = Math.max(this.count, texts.length)
  }

  /** Every prompt of the set, made now if none was (promptsFrom); undefined without it. */
  all(): readonly string[] | undefined {
    this.made ??= this.make(0)
    return this.made
  }

  /**
   * Twice as many prompts; `later`: made a group at a time by `group` (a slow model's build in
   * the background), else made now. False when there are none to grow from.
   */
  grow(later: boolean): boolean {
    if (!this.o.promptsFrom || !this.made) return false
    const from = this.count
    this.count *= 2
    if (!later) this.made = [...this.made, ...(this.make(from) ?? [])]
    return true
  }

  /** Prompts `from` to `to`: those made already, else made now as a sliced job (promptsJob); undefined without it. */
  *group(from: number, to: number): Generator<void, readonly string[] | undefined> {
    const made = this.made && this.made.length >= to ? this.made.slice(from, to) : yield* this.job(from, to)
    if (made) this.made = [...(this.made ?? []).slice(0, from), ...made]
    return made
  }

  /** Secret prompts `from` to `to` as a sliced job (promptsJob); undefined without it. */
  private *job(from: number, to: number): Generator<void, string[] | undefined> {
    const job = this.o.promptsJob
    if (!job) return undefined
    const made = yield* secretPromptsFollowingJob(this.history, this.model, job, {
      count: to,
      from,
      seed: this.o.seed ?? 1,
      ...(this.o.tokenizer ? { tokenizer: this.o.tokenizer } : {})
    })
    made.templated.forEach((t, k) => {
      this.templated[from + k] = t
    })
    return made.texts
  }

  /** Secret prompts `from` to `count` (promptsFrom); undefined without it. */
  private make(from: number): string[] | undefined {
    if (!this.o.promptsFrom) return undefined
    const made = secretPromptsFollowing(this.history, this.model, this.o.promptsFrom, {
      count: this.count,
      from,
      seed: this.o.seed ?? 1
    })
    made.templated.forEach((t, k) => {
      this.templated[from + k] = t
    })
    return made.texts
  }
}
