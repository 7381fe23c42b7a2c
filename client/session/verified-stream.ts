import type { Tokenizer } from '../../shards/index.js'
import { TooManyRollbacksError } from '../errors.js'
import { MAX_ROLLBACKS, type RollbackRecord, type StreamEvent, TokenTaint, TokenText } from './rollback.js'

/** One run of the remote span: a fresh session on a route planned without the convicted peers. */
export interface Attempt {
  /** The completion's next tokens, given the prompt and the tokens kept so far. */
  readonly tokens: AsyncGenerator<number>
  /** The peers of the route that computed the step behind the last token. */
  lastStepPeers(): readonly string[]
  /** Ends the session; resolves once its canaries have settled (late convictions count). */
  close(): Promise<void>
}

export interface VerifiedStreamInit {
  readonly tokenizer: Tokenizer
  readonly lastPromptToken: number
  readonly maxTokens: number
  /** A new attempt over the prompt plus `kept`, for at most `remaining` tokens. */
  open(kept: readonly number[], remaining: number): Attempt
  isConvicted(peerId: string): boolean
  /** A peer whose canary evidence has passed the threshold (client/session/verified-clear.ts). */
  readonly isCleared?: (peerId: string) => boolean
  /**
   * Before the result is final: canaries for the peers behind it not yet cleared. A peer still
   * not cleared after it (its canary steps fail: busy, timing out) is unverifiable, and its tokens
   * are recomputed like a convicted peer's.
   */
  readonly clear?: (peers: string[]) => Promise<void>
  /** verifiedStream: hand out a token only once every peer behind it is cleared. */
  readonly hold?: boolean
  /** Convicted and unverifiable peers found in the session: kept off the next attempt's routes. */
  onRollback(convicted: string[], unverifiable: string[], record: RollbackRecord): void
}

export interface VerifiedOutcome {
  readonly tokens: number[]
  readonly rollbacks: RollbackRecord[]
}

/**
 * Rollback on conviction (issue 16): each token records the peers of the step that made it; a
 * token is void once any peer that took part in it or in an earlier step of the session is
 * convicted (its KV shaped everything after). The void tail is recomputed on a fresh session over
 * prompt + the tokens kept, on a route without the convicted peers (so no KV of theirs is ever
 * restored: the new session has none of the old one's snapshots). Tokens already handed out are
 * replaced by a rollback event once the recomputation has caught up with them. With isCleared
 * (verifiedStream), tokens are held until every peer behind them has cleared.
 */
export async function* verifiedTokens(init: VerifiedStreamInit): AsyncGenerator<StreamEvent, VerifiedOutcome> {
  const tokens: number[] = []
  const taint = new TokenTaint()
  const text = new TokenText(init.tokenizer, init.lastPromptToken)
  const rollbacks: RollbackRecord[] = []
  let shown = 0
  let pending: { position: number; textOffset: number; upTo: number; convicted: Set<string> } | undefined
  const convicted = (p: string): boolean => init.isConvicted(p)

  function* release(final: boolean): Generator<StreamEvent> {
    const limit = init.hold && init.isCleared && !final ? taint.clearedPrefix(init.isCleared) : tokens.length
    if (pending) {
      if (limit < pending.upTo && !final) return
      const { position, textOffset } = pending
      yield {
        type: 'rollback',
        position,
        textOffset,
        tokens: tokens.slice(position, limit),
        text: text.textOf(position, limit),
        convicted: [...pending.convicted]
      }
      pending = undefined
      shown = limit
    }
    for (; shown < limit; shown++) yield { type: 'token', token: tokens[shown], text: text.textOf(shown, shown + 1) }
  }

  for (let attempt = 0; ; attempt++) {
    const run = init.open(tokens.slice(), init.maxTokens - tokens.length)
    let cut: number | undefined
    try {
      for await (const token of run.tokens) {
        taint.record(tokens.length, run.lastStepPeers())
        tokens.push(token)
        text.push(token)
        cut = taint.firstTainted(convicted)
        if (cut !== undefined) break
        yield* release(false)
      }
    } finally {
      await run.close()
    }
    cut ??= taint.firstTainted(convicted)
    let unverifiable: string[] = []
    if (cut === undefined && init.isCleared && init.clear) {
      const cleared = init.isCleared
      const uncleared = taint.peers(tokens.length, (p) => !cleared(p))
      if (uncleared.length > 0) {
        await init.clear(uncleared)
        unverifiable = taint.peers(tokens.length, (p) => !cleared(p) && !convicted(p))
        cut = taint.firstTainted((p) => convicted(p) || unverifiable.includes(p))
      }
    }
    if (cut === undefined) break
    if (attempt >= MAX_ROLLBACKS) throw new TooManyRollbacksError(attempt)
    const peers = taint.peers(tokens.length, convicted)
    const record: RollbackRecord = {
      position: cut,
      discarded: tokens.length - cut,
      convicted: peers,
      ...(unverifiable.length > 0 ? { unverifiable } : {}),
      shown: cut < shown
    }
    rollbacks.push(record)
    init.onRollback(peers, unverifiable, record)
    if (pending || cut < shown) {
      // tokens before min(cut, pending.position) are the same in what was shown and what is kept
      const position = Math.min(cut, pending?.position ?? cut)
      pending = {
        position,
        textOffset: text.offsetOf(position),
        upTo: Math.max(shown, pending?.upTo ?? 0),
        convicted: new Set([...(pending?.convicted ?? []), ...peers, ...unverifiable])
      }
      shown = Math.min(shown, position)
    }
    tokens.length = cut
    taint.truncate(cut)
    text.truncate(cut)
  }
  yield* release(true)
  return { tokens, rollbacks }
}
