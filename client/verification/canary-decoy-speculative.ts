import { type CanarySet, type DecoyStep, inputFor } from '../../canary/index.js'
import { createEdge, createShard, type Edge, errorCode, type Kernels, type ModelFile, type Shard } from '../../shards/index.js'
import { ngramDraft } from '../speculation/draft-ngram.js'

/*
 * Decoys shaped like speculative sessions (issue 18). A real speculative step sends the last
 * sampled token and the drafted ones, K+1 rows at the next position; the rows after the first
 * rejected draft are rewound by the next step, which starts right after the kept tokens. A peer
 * sees rows per step and those rewinds, so a decoy of a speculative session does the same: it
 * drafts over its own canary's tokens with the drafter the real session uses (prompt lookup),
 * as many tokens as the real step asked for, keeps the drafts that equal the canary's next tokens
 * and rewinds the rest. Rows up to the first rejected draft are the canary's (their reference
 * outputs are known and scored); the rejected rows are the drafted tokens' own hidden states,
 * computed on the client as its first blocks compute a real step's (DecoyDraftRows).
 */

/** A speculative decoy's progress over its canary. */
export interface SpeculativeDecoy {
  /** The canary's tokens (the decoy's "text"). */
  readonly tokens: readonly number[]
  /** The next step starts here (its first row is the canary's token at `pos`). */
  pos: number
  /** Positions the session covers: its last step starts before `end`. */
  readonly end: number
  /** The draft length of the last step (used when a real step names none). */
  lastK: number
  /** The client-side session computing rejected rows' states (opened on first need). */
  rowSession?: string
  /** Positions of that session holding the canary's own tokens (rejected drafts come after). */
  rowContext: number
}

/** One step of a decoy: its position and rows; `scored` leading rows are the canary's own. */
export interface PlannedDecoyStep extends DecoyStep {
  readonly scored: number
  /** Drafted tokens the step sends after its scored rows (rejected drafts and those after them). */
  readonly rejected: readonly number[]
}

/** Start a speculative decoy after its prefill of `prompt` rows, covering positions [0, end). */
export function speculativeDecoy(tokens: readonly number[], prompt: number, end: number, k: number): SpeculativeDecoy {
  return { tokens, pos: prompt, end: Math.min(end, tokens.length), lastK: Math.max(0, k), rowContext: 0 }
}

/** Whether a speculative decoy has covered its positions. */
export function speculativeDone(d: SpeculativeDecoy): boolean {
  return d.pos >= d.end
}

/**
 * The next step of a speculative decoy, as speculative-decode.ts builds a real one: the canary's
 * token at `pos`, then up to `k` prompt-lookup drafts over the canary's tokens so far (capped by
 * the positions left), kept while they equal the canary's next tokens. Advances `pos` past the
 * kept ones (the next step rewinds the rest).
 */
export function nextSpeculativeStep(d: SpeculativeDecoy, k?: number): PlannedDecoyStep {
  if (k !== undefined) d.lastK = Math.max(0, k)
  const pos = d.pos
  const limit = Math.max(0, d.end - pos - 1)
  const drafts = limit > 0 && d.lastK > 0 ? ngramDraft(d.tokens.slice(0, pos + 1), Math.min(d.lastK, limit)) : []
  let kept = 0
  while (kept < drafts.length && drafts[kept] === d.tokens[pos + 1 + kept]) kept++
  d.pos = pos + kept + 1
  return { startPosition: pos, rows: drafts.length + 1, scored: kept + 1, rejected: drafts.slice(kept) }
}

/**
 * Hidden states of a decoy's rejected drafts at a boundary: the canary's tokens as context, then
 * the drafted tokens, through the embeddings and blocks [0, boundary) on the client (its own
 * first blocks at their boundary, a shard of the model's blocks for a relayed middle hop). A
 * thin client that does not hold those blocks sends another canary's rows at the same positions.
 */
export class DecoyDraftRows {
  private edge?: Edge
  private readonly shards = new Map<number, Shard | null>()
  private seq = 0

  constructor(
    private readonly model: ModelFile,
    private readonly o: { readonly kernels?: Kernels; readonly edge?: Edge; readonly first?: Shard }
  ) {}

  /** The step's input: the canary's rows, then the rejected drafts' states. */
  input(set: CanarySet, canary: number, boundary: number, d: SpeculativeDecoy | undefined, step: PlannedDecoyStep): Float32Array {
    const own = inputFor(set, canary, step.startPosition, step.scored)
    if (!d || step.rejected.length === 0) return own
    const at = step.startPosition + step.scored
    const out = new Float32Array((step.scored + step.rejected.length) * set.dim)
    out.set(own)
    out.set(this.rejectedRows(set, canary, boundary, d, at, step.rejected), own.length)
    return out
  }

  private rejectedRows(
    set: CanarySet,
    canary: number,
    boundary: number,
    d: SpeculativeDecoy,
    at: number,
    rejected: readonly number[]
  ): Float32Array {
    const shard = boundary === 0 ? undefined : this.shardFor(boundary)
    if (shard === null) {
      // another canary's rows at these positions: hidden states of the same positions
      const other = (canary + 1) % set.canaries.length
      const n = Math.min(rejected.length, set.canaries[other].tokens.length - at)
      const rows = new Float32Array(rejected.length * set.dim)
      if (n > 0) rows.set(inputFor(set, other, at, n))
      return rows
    }
    this.edge ??= this.o.edge ?? createEdge({ model: this.model, kernels: this.o.kernels })
    if (!shard) return this.edge.embed([...rejected])
    if (d.rowSession === undefined) {
      d.rowSession = `decoy-rows-${++this.seq}`
      shard.openSession(d.rowSession, { maxLength: d.tokens.length })
    }
    // the canary's tokens before `at` as context (a start below the session's length rewinds it,
    // so the rejected drafts of an earlier step are overwritten)
    const from = Math.min(d.rowContext, at)
    if (from < at) shard.forward(d.rowSession, this.edge.embed(d.tokens.slice(from, at)), from)
    d.rowContext = at
    return shard.forward(d.rowSession, this.edge.embed([...rejected]), at)
  }

  private shardFor(boundary: number): Shard | null {
    if (this.o.first && this.o.first.end === boundary) return this.o.first
    let shard = this.shards.get(boundary)
    if (shard !== undefined) return shard
    try {
      shard = createShard({ model: this.model, start: 0, end: boundary, kernels: this.o.kernels })
    } catch (err) {
      if (errorCode(err) !== 'BLOCK_NOT_HELD') throw err
      shard = null
    }
    this.shards.set(boundary, shard)
    return shard
  }

  /** The decoy ended: free its client-side rows session. */
  release(d: SpeculativeDecoy | undefined): void {
    if (d?.rowSession === undefined) return
    for (const s of [this.o.first, ...this.shards.values()]) s?.closeSession(d.rowSession)
    d.rowSession = undefined
    d.rowContext = 0
  }
}
