import type { Receipt } from '../protocol/index.js'
import { InvalidArgumentError } from '../shards/index.js'
import { auditChainedStep } from './chained-decoy.js'
import type { HopSession } from './hop.js'

/** Real chained steps per audit round by default. */
export const DEFAULT_AUDIT_EVERY = 4
/**
 * A middle hop keeps its last 8 forwarded outputs per session for audits (node/chain.ts), so a
 * round may not wait for more real steps than that.
 */
export const MAX_AUDIT_EVERY = 8

interface Pending {
  readonly hops: readonly HopSession[]
  readonly stepId: number
  readonly rows: number
  readonly receipts: readonly Receipt[]
  resolve(outputs: Float32Array[]): void
  reject(err: unknown): void
}

/**
 * Audits of chained steps in rounds (chained-decoy.ts says what an audit is). Every chained step
 * of a client with canaries on is audited, real or decoy alike, so that an audit says nothing
 * about a session. One audit per step costs each middle hop a request and an answer per token:
 * on a 2-core host where every message wakes a process with caches cold from the kernels, that
 * was ~11 % of a 3-hop 110m swarm's decode rate. Audits therefore wait and go out together,
 * every `every` real chained steps: the pending audits of every session (real and decoy) in one
 * burst, which a middle hop reads and answers in one wake-up. Decoy audits wait for the same
 * rounds as real ones (a round right after each decoy step would single it out); scoring a decoy's
 * middle hops waits for its round (at most `every` tokens).
 */
export class AuditBatcher {
  private pending: Pending[] = []
  private realSinceRound = 0
  private draining = 0

  constructor(
    readonly every: number = DEFAULT_AUDIT_EVERY,
    private readonly timeoutMs = 30_000
  ) {
    if (!Number.isInteger(every) || every < 1 || every > MAX_AUDIT_EVERY)
      throw new InvalidArgumentError(`auditEvery must be an integer in [1, ${MAX_AUDIT_EVERY}]`)
  }

  /** Audit a chained step's middle hops in the next round: their outputs in route order. */
  audit(
    kind: 'real' | 'decoy',
    hops: readonly HopSession[],
    stepId: number,
    rows: number,
    receipts: readonly Receipt[]
  ): Promise<Float32Array[]> {
    const done = new Promise<Float32Array[]>((resolve, reject) => {
      this.pending.push({ hops, stepId, rows, receipts, resolve, reject })
    })
    if (kind === 'real') this.realSinceRound++
    if (this.realSinceRound >= this.every || this.draining > 0) this.round()
    return done
  }

  /** Send every pending audit now. */
  round(): void {
    const batch = this.pending.splice(0)
    this.realSinceRound = 0
    if (batch.length === 0) return
    // timed from when the round goes out (an audit may have waited `every` steps for it), one
    // signal per audit: each middle hop's await listens on it
    for (const p of batch)
      auditChainedStep(p.hops, p.stepId, p.rows, p.receipts, { signal: AbortSignal.timeout(this.timeoutMs) }).then(
        p.resolve,
        p.reject
      )
  }

  /** Run `work` (which waits for audits) with audits going out at once, pending ones first. */
  async drain<T>(work: () => Promise<T>): Promise<T> {
    this.draining++
    this.round()
    try {
      return await work()
    } finally {
      this.draining--
    }
  }
}
