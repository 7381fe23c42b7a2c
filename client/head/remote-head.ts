/**
 * The client's side of the head on a peer (issue #35). It asks the last block's hop for the
 * top-k of each step (client/session/head-channel.ts), opens the sealed reply (crypto/head-seal.ts),
 * and checks it against its own low-dimensional head (shards/head/head-rows.ts): the rows of the
 * tokens of its context (language-adaptive) and a secret random sample drawn at start. The hop's
 * hidden output travels in the check dtype, so the client evaluates those rows itself:
 *
 * - a returned token the client holds must carry the client's logit within the honest bound;
 * - a token the client holds that is missing from a truncated top-k must lie below the k-th
 *   value (else the peer left out, or swapped away, a likelier token).
 *
 * Either failure is a violation; HEAD_CONVICT_VIOLATIONS of them convict the peer (docs/verification.md
 * "The head on a peer": the bound, and detection measured per tamper mode).
 */
import { headReplyKey, openHeadReply } from '../../crypto/index.js'
import type { HeadRequest } from '../../protocol/index.js'
import {
  type CheckDType,
  decodeHeadRows,
  type HeadRow,
  HeadRows,
  type ModelConfig,
  type ModelFile,
  rowBytes
} from '../../shards/index.js'
import type { HeadChannel, HeadReplyRecord } from '../session/head-channel.js'

/** Violations that convict a head peer (an honest one shows none over ≥ 10,000 checks: test/client/head-check.test.ts). */
export const HEAD_CONVICT_VIOLATIONS = 2
/** Secret random rows the client holds (at most the vocabulary). */
export const DEFAULT_SECRET_ROWS = 1024
/** The hidden output's dtype for the check: q8_0 is about a quarter of f32 (docs/performance.md). */
export const DEFAULT_CHECK_DTYPE: CheckDType = 'q8_0'

export interface RemoteHeadInit {
  readonly config: ModelConfig
  /** The client's low-dimensional head (lowDimensionalHead): shared by its generations. */
  readonly rows: HeadRows
  readonly channel: HeadChannel
  readonly checkDtype?: CheckDType
}

/**
 * A client's low-dimensional head: the head rows of a secret random sample (drawn here, never
 * sent), from the rows `readable` names where the client holds only some (a thin client's fetched
 * head chunks, client/weights/head-chunks.ts). Only those rows are read, never the whole head.
 */
export function lowDimensionalHead(
  model: ModelFile,
  secretRows = DEFAULT_SECRET_ROWS,
  readable?: (id: number) => boolean
): HeadRows {
  const rows = new HeadRows(model, readable ? { readable } : {})
  const vocab = model.config.vocabSize
  const pool: number[] | undefined = readable ? [] : undefined
  if (pool) for (let id = 0; id < vocab; id++) if (readable?.(id)) pool.push(id)
  const size = pool?.length ?? vocab
  const n = Math.min(size, secretRows)
  const secret = new Set<number>()
  // Web Crypto (Node and browsers alike); the modulo bias of 2^32 over a vocabulary is < 2^-14
  const draw = new Uint32Array(256)
  while (secret.size < n) {
    globalThis.crypto.getRandomValues(draw)
    for (const x of draw) if (secret.size < n) secret.add(pool ? pool[x % size] : x % vocab)
  }
  rows.add(secret)
  return rows
}

/** The head memory a client with these rows holds (HeadStats.memory). */
export function headMemory(rows: HeadRows, model: ModelFile, edgeHeadBytes: number): NonNullable<HeadStats['memory']> {
  const info = model.matrixInfo?.(model.config.tiedEmbeddings ? 'token_embd' : 'output')
  const fullHeadBytes = info ? info.rows * rowBytes(info.dtype, info.cols) : 0
  return { rowsHeld: rows.ids.length, rowsBytes: rows.bytes, storedBytesRead: rows.storedBytesRead, fullHeadBytes, edgeHeadBytes }
}

export interface HeadStats {
  /** Steps whose head ran on a peer, and fallbacks that asked a step's full row. */
  steps: number
  fallbacks: number
  /** Tokens compared (a returned token the client holds, or one it holds that was left out). */
  checks: number
  violations: number
  /** Sealed head bytes received. */
  headBytes: number
  convicted: string[]
  /**
   * Issue #35 item 4: the client's memory for the head: rows it holds (f32 bytes), the head's
   * stored bytes it read (its rows alone), and the full head matrix's bytes it does not hold.
   */
  memory?: {
    rowsHeld: number
    rowsBytes: number
    storedBytesRead: number
    fullHeadBytes: number
    /** Head matrix bytes the client's edge holds anyway: 0 unless something computed logits locally (canary prompts). */
    edgeHeadBytes: number
  }
}

/** σs of an honest difference a comparison allows (p ≈ 2e-9 per comparison for a Gaussian sum; two violations convict). */
export const HEAD_TOLERANCE_SIGMAS = 6

/**
 * The tolerance of one comparison: HEAD_TOLERANCE_SIGMAS σ of the quantisation (shards/head/head-rows.ts),
 * the f16 gap's rounding (2^-11 of the gap, twice), the norm's own rounding (1e-4 of the logit) and a floor.
 */
export function headTolerance(sigma: number, gap: number, logit: number): number {
  return HEAD_TOLERANCE_SIGMAS * sigma + 2 ** -10 * Math.abs(gap) + 1e-4 * Math.abs(logit) + 1e-3
}

export class RemoteHead {
  readonly rows: HeadRows
  readonly stats: HeadStats = { steps: 0, fallbacks: 0, checks: 0, violations: 0, headBytes: 0, convicted: [] }
  readonly checkDtype: CheckDType
  private readonly violations = new Map<string, number>()

  constructor(private readonly init: RemoteHeadInit) {
    this.rows = init.rows
    this.checkDtype = init.checkDtype ?? DEFAULT_CHECK_DTYPE
  }

  get channel(): HeadChannel {
    return this.init.channel
  }

  /** Language-adaptive rows: the tokens of the context (prompt and output) join the held rows. */
  observeTokens(ids: Iterable<number>): void {
    this.rows.add(ids)
  }

  isConvicted(peerId: string): boolean {
    return this.stats.convicted.includes(peerId)
  }

  /** Ask the next step's head for these sampling settings (full: the whole row in f32). */
  ask(req: Omit<HeadRequest, 'checkDtype'>): void {
    this.init.channel.request = { ...req, checkDtype: this.checkDtype }
  }

  /** No head on the next step. */
  stop(): void {
    this.init.channel.request = undefined
  }

  /** The reply of the step just run, opened and checked; `hidden` is the step's output [T, dim]. */
  take(hidden: Float32Array): { rows: HeadRow[]; peerId: string } {
    const record = this.init.channel.take()
    const rows = this.open(record)
    this.stats.steps++
    this.stats.headBytes += record.sealed.length
    const dim = this.init.config.dim
    const T = hidden.length / dim
    rows.forEach((row, r) => {
      const at = record.rows === 1 ? T - 1 : r
      this.check(record.hopPeerId, row, hidden.subarray(at * dim, (at + 1) * dim))
    })
    return { rows, peerId: record.hopPeerId }
  }

  private open(record: HeadReplyRecord): HeadRow[] {
    const key = headReplyKey(record.keys)
    try {
      const binding = { ...record }
      const plain = openHeadReply(key, binding, record.sealed)
      const req = this.init.channel.request
      return decodeHeadRows(plain, record.rows, this.init.config.vocabSize, req?.valuesF32 ?? false, req?.logSumExp === true)
    } finally {
      key.fill(0)
    }
  }

  /** Compare one returned row with the rows the client holds; count violations per peer. */
  check(peerId: string, row: HeadRow, hidden: Float32Array): void {
    const returned = new Map<number, number>()
    for (let i = 0; i < row.ids.length; i++) returned.set(row.ids[i], row.values[i])
    const k = row.ids.length
    const truncated = k < this.init.config.vocabSize
    const kth = row.values[k - 1]
    // a held token left out passes unless its logit is above the k-th: σ is needed only there
    const local = this.rows.evaluate(hidden, this.checkDtype, {
      above: truncated ? kth : Number.POSITIVE_INFINITY,
      ids: new Set(returned.keys())
    })
    let bad = 0
    for (let i = 0; i < local.ids.length; i++) {
      const id = local.ids[i]
      const mine = local.logits[i]
      const theirs = returned.get(id)
      if (theirs !== undefined) {
        this.stats.checks++
        if (Math.abs(theirs - mine) > headTolerance(local.sigmas[i], row.values[0] - theirs, mine)) bad++
      } else if (truncated) {
        this.stats.checks++
        if (mine - headTolerance(local.sigmas[i], row.values[0] - kth, mine) > kth) bad++
      }
    }
    if (bad === 0) return
    this.stats.violations++
    const n = (this.violations.get(peerId) ?? 0) + 1
    this.violations.set(peerId, n)
    if (n >= HEAD_CONVICT_VIOLATIONS && !this.stats.convicted.includes(peerId)) this.stats.convicted.push(peerId)
  }
}

/** The head stats of a generation's attempts, summed. */
export function headStatsOf(heads: readonly RemoteHead[]): HeadStats {
  const out: HeadStats = { steps: 0, fallbacks: 0, checks: 0, violations: 0, headBytes: 0, convicted: [] }
  for (const { stats } of heads) {
    out.steps += stats.steps
    out.fallbacks += stats.fallbacks
    out.checks += stats.checks
    out.violations += stats.violations
    out.headBytes += stats.headBytes
    for (const p of stats.convicted) if (!out.convicted.includes(p)) out.convicted.push(p)
  }
  return out
}
