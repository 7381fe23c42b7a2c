import type { AbortOptions } from '@libp2p/interface'
import type { Host, Receipt } from '../../protocol/index.js'
import { openChainHops } from '../session/chain-ids.js'
import { type HopOpenInit, HopSession, type HopTarget } from '../session/hop.js'
import type { ReceiptLedger } from './receipts.js'

/*
 * Chained forwarding, what a hop sees: the client opens the session on every hop (each told its
 * upstream and its next hop), steps enter at the first hop and reach a middle hop from its
 * upstream, and only the last hop's output comes back. A decoy that went from the client straight
 * to a middle hop would stand out by its source alone. So in chained mode a decoy is a whole
 * chained session over the route, opened and stepped exactly as a real one, and its middle hops'
 * outputs are read back by *audits*: after every chained step (real or decoy alike, so an audit
 * says nothing about the session) the client asks each non-last hop for the step's output
 * (`AwaitResults`, a round of steps in one request: client/verification/audit-batch.ts), the output it forwarded. The answer must hash to the output hash the hop signed
 * in its receipt (and that the next hop signed as its input), so it is bound to what the hop
 * actually sent on: a hop cannot tamper on the way and answer the audit honestly. An audit comes
 * after the step, so it cannot change how the step was computed either.
 */

/** Audits a chained step's middle hops (AuditBatcher.audit, bound to a kind): their outputs in route order. */
export type ChainedStepAudit = (
  hops: readonly HopSession[],
  stepId: number,
  rows: number,
  receipts: readonly Receipt[]
) => Promise<Float32Array[]>

/** A decoy session chained over a whole route, opened and stepped as RemotePipeline does a real one. */
export class ChainedDecoy {
  private constructor(
    readonly route: readonly HopTarget[],
    readonly hops: readonly HopSession[]
  ) {}

  /** The decoy's session id on its first hop (every hop has its own, issue #39). */
  get sessionId(): string {
    return this.hops[0].sessionId
  }

  static async open(
    host: Host,
    route: readonly HopTarget[],
    dim: number,
    o: Omit<HopOpenInit, 'next' | 'upstream' | 'ledger' | 'nextSessionId' | 'upstreamSessionId'>,
    options: AbortOptions = {}
  ): Promise<ChainedDecoy> {
    // From the last hop back, as a real chained session: each hop's downstream knows it first;
    // each hop an id of its own, as a real chain's (issue #39, session/chain-ids.ts)
    const { hops } = await openChainHops(
      route.length,
      o.sessionId,
      (i, ids) =>
        HopSession.open(
          host,
          route[i],
          dim,
          { ...o, ...ids, next: route[i + 1], upstream: i > 0 ? route[i - 1].peerId : undefined },
          options
        ),
      [],
      true,
      options
    )
    return new ChainedDecoy(route, hops)
  }

  /**
   * One chained step: enters at the first hop, the last hop's output is awaited, receipts of every
   * hop are checked (hash chain from what was sent to what came back), and the middle hops' audit
   * is queued. Returns the last hop's output, the middle hops' (when audited), and the receipts.
   */
  async sendChainedStep(
    stepId: number,
    startPosition: number,
    input: Float32Array,
    dim: number,
    ledger: ReceiptLedger,
    audit: ChainedStepAudit,
    options: AbortOptions = {}
  ) {
    const rows = input.length / dim
    const first = this.hops[0]
    const last = this.hops[this.hops.length - 1]
    // one way, as real chained steps go (step-transport.ts): receipts come with the output. The
    // step is written first, as a real one is, so a decoy step beside a real one reaches the
    // first hop as promptly (the last hop keeps an output that arrives before its await)
    const sent = first.stepChained(stepId, startPosition, input, this.hops.slice(1), options)
    const result = last.awaitResult(stepId, rows, options)
    result.catch(() => {})
    const ack = await sent
    const got = await Promise.race([result, ack.failed])
    first.settle(ack.requestId)
    await ledger.check(
      this.route,
      { sessionId: this.sessionId, sessionIds: this.hops.map((h) => h.sessionId), stepId, position: startPosition },
      got.receipts,
      ack.sent,
      got.received
    )
    // the middle hops' outputs come with the next audit round (audit-batch.ts)
    const middle = audit(this.hops, stepId, rows, got.receipts)
    middle.catch(() => {})
    return {
      last: got.hidden,
      middle,
      receipts: got.receipts,
      computeMs: got.timings.reduce((s, t) => s + t.computeMs, 0)
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.hops.map((h) => h.close()))
  }
}
