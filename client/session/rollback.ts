import type { StreamDecoder, Tokenizer } from '../../shards/index.js'

/** A token as the stream hands it out. */
export interface TokenEvent {
  readonly type: 'token'
  readonly token: number
  readonly text: string
}

/**
 * Tokens already handed out were computed through a peer convicted since: they are replaced.
 * Everything the stream gave from completion token `position` (character `textOffset` of the
 * streamed completion) on is void; `tokens`/`text` are what honest peers computed instead, up to
 * where the stream had got (the stream then goes on from there).
 */
export interface RollbackEvent {
  readonly type: 'rollback'
  readonly position: number
  readonly textOffset: number
  readonly tokens: number[]
  readonly text: string
  /** The peers whose conviction (or failed checks: unverifiable) voided the tokens. */
  readonly convicted: string[]
}

export type StreamEvent = TokenEvent | RollbackEvent

/** One recomputation, as the verification report lists it. */
export interface RollbackRecord {
  /** First completion token recomputed, and how many tokens had been computed then. */
  readonly position: number
  readonly discarded: number
  readonly convicted: string[]
  /** Peers that could not be checked before the result was final (their canary steps failed). */
  readonly unverifiable?: string[]
  /** Whether any of the discarded tokens had been handed out (a rollback event followed). */
  readonly shown: boolean
}

/** More recomputations than this: every one follows a new conviction, so the swarm is mostly tampering. */
export const MAX_ROLLBACKS = 16

/**
 * Which peers computed which completion token. Token i came out of the step whose route is
 * peersAt[i]; its value also depends on the KV every earlier step left on the hops, so a peer
 * taints every token from its first step in the session on (rollback position = that step).
 */
export class TokenTaint {
  private readonly peersAt: string[][] = []

  record(index: number, peers: readonly string[]): void {
    this.peersAt[index] = [...peers]
  }

  get length(): number {
    return this.peersAt.length
  }

  /** The first token a peer the predicate names took part in (undefined: none). */
  firstTainted(convicted: (peerId: string) => boolean): number | undefined {
    for (let i = 0; i < this.peersAt.length; i++) if (this.peersAt[i]?.some(convicted)) return i
    return undefined
  }

  /** The peers (of tokens < upTo) the predicate names. */
  peers(upTo: number, pick: (peerId: string) => boolean): string[] {
    const out = new Set<string>()
    for (let i = 0; i < Math.min(upTo, this.peersAt.length); i++) for (const p of this.peersAt[i] ?? []) if (pick(p)) out.add(p)
    return [...out]
  }

  /** How many leading tokens were computed only by peers the predicate accepts. */
  clearedPrefix(cleared: (peerId: string) => boolean): number {
    for (let i = 0; i < this.peersAt.length; i++) if (!(this.peersAt[i] ?? []).every(cleared)) return i
    return this.peersAt.length
  }

  truncate(length: number): void {
    this.peersAt.length = Math.min(this.peersAt.length, length)
  }
}

/**
 * The completion's text per token, as a stream decoder gives it (a token's text depends on the
 * decoder's buffered bytes, so a truncation replays the kept tokens into a fresh decoder).
 */
export class TokenText {
  private decoder: StreamDecoder
  private readonly pieces: string[] = []
  private readonly tokens: number[] = []

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly lastPromptToken: number
  ) {
    this.decoder = tokenizer.createDecoder()
  }

  push(token: number): string {
    const prev = this.tokens.length > 0 ? this.tokens[this.tokens.length - 1] : this.lastPromptToken
    const piece = this.decoder.push(token, prev)
    this.tokens.push(token)
    this.pieces.push(piece)
    return piece
  }

  /** Characters of the text of tokens [0, upTo). */
  offsetOf(upTo: number): number {
    let n = 0
    for (let i = 0; i < Math.min(upTo, this.pieces.length); i++) n += this.pieces[i].length
    return n
  }

  /** Text of tokens [from, to). */
  textOf(from: number, to = this.pieces.length): string {
    return this.pieces.slice(from, to).join('')
  }

  truncate(length: number): void {
    const kept = this.tokens.slice(0, length)
    this.tokens.length = 0
    this.pieces.length = 0
    this.decoder = this.tokenizer.createDecoder()
    for (const t of kept) this.push(t)
  }
}
