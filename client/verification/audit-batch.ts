import { MAX_AWAITED_STEPS, type Receipt, sha256 } from '../../protocol/index.js'
import { InvalidArgumentError } from '../../shards/index.js'
import { BadReceiptError } from '../errors.js'
import type { HopSession } from '../session/hop.js'

/** Real chained steps per audit round by default. */
export const DEFAULT_AUDIT_EVERY = 4
/**
 * A middle hop keeps its last 8 forwarded outputs per session for audits (node/daemon/chain.ts), and a
 * real step's audit is queued once the step after it is sent (its checks run off the critical
 * path: client/session/step-transport.ts), so a round must go out while the hop still holds its first
 * step: with 8, the ninth step pushed the first out and its audit waited for its timeout (30 s
 * at every session's end). Two steps to spare.
 */
export const MAX_AUDIT_EVERY = 6

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

  /** Send every pending audit now: one request per middle hop session (awaitResults). */
  round(): void {
    const batch = this.pending.splice(0)
    this.realSinceRound = 0
    if (batch.length === 0) return
    // timed from when the round goes out (an audit may have waited `every` steps for it)
    const signal = AbortSignal.timeout(this.timeoutMs)
    const outputs = new Map<Pending, Promise<Float32Array>[]>(batch.map((p) => [p, []]))
    for (const [hop, asked] of byHop(batch)) {
      for (const part of requests(hop, asked)) {
        const answer = hop.awaitResults(
          part.map((a) => ({ stepId: a.p.stepId, rows: a.p.rows })),
          { signal }
        )
        part.forEach((a, k) => {
          outputs.get(a.p)![a.index] = answer.then((got) => checked(hop, a.p, a.index, got[k]))
        })
      }
    }
    for (const p of batch) Promise.all(outputs.get(p)!).then(p.resolve, p.reject)
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

/** One middle hop's output of one pending audit. */
interface Asked {
  readonly p: Pending
  /** The hop's index in the route. */
  readonly index: number
}

/** The round's audits by middle hop session (every hop of a route but the last), in order. */
function byHop(batch: readonly Pending[]): Map<HopSession, Asked[]> {
  const out = new Map<HopSession, Asked[]>()
  for (const p of batch) {
    p.hops.slice(0, -1).forEach((hop, index) => {
      let asked = out.get(hop)
      if (!asked) out.set(hop, (asked = []))
      asked.push({ p, index })
    })
  }
  return out
}

/** A hop's audits cut into requests of at most MAX_AWAITED_STEPS steps and its max length of rows. */
function requests(hop: HopSession, asked: readonly Asked[]): Asked[][] {
  const out: Asked[][] = []
  let part: Asked[] = []
  let rows = 0
  for (const a of asked) {
    if (part.length > 0 && (part.length >= MAX_AWAITED_STEPS || rows + a.p.rows > hop.maxLength)) {
      out.push(part)
      part = []
      rows = 0
    }
    part.push(a)
    rows += a.p.rows
  }
  if (part.length > 0) out.push(part)
  return out
}

const equal = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((v, i) => v === b[i])

/**
 * A middle hop's audited output: it must hash to the output hash the hop signed in its receipt
 * (and that the next hop signed as its input), so it is what the hop actually sent on
 * (client/verification/chained-decoy.ts says why).
 */
function checked(hop: HopSession, p: Pending, index: number, got: { hidden: Float32Array; received: Uint8Array }): Float32Array {
  const signed = p.receipts[index]
  if (!signed || !equal(signed.outputHash, sha256(got.received))) {
    throw new BadReceiptError(
      hop.target.peerId,
      `audit of ${hop.target.peerId} for step ${p.stepId}: the output it returns is not the one it signed and forwarded`
    )
  }
  return got.hidden
}
