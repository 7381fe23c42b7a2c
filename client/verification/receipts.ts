import { type Receipt, sha256, verifyReceipt } from '../../protocol/index.js'
import { BadReceiptError } from '../errors.js'
import type { ReplayIndex } from './replay-index.js'

const equal = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((v, i) => v === b[i])

export interface ReceiptSummary {
  readonly checked: number
  readonly invalid: number
  readonly byPeer: Record<string, { checked: number; invalid: number }>
}

/**
 * Checks every hop's signed receipt (docs/design.md §5, docs/verification.md): signature under the hop's peer id, span,
 * and hashes that chain from what the client sent to what it got back. Keeps the last
 * receipts per peer as evidence for the verification report. With a ReplayIndex, every verified
 * receipt also goes to it: one output signed for two different inputs convicts the peer there.
 */
export class ReceiptLedger {
  private checked = 0
  private invalid = 0
  private readonly byPeer = new Map<string, { checked: number; invalid: number }>()
  private readonly recent = new Map<string, Array<{ sessionId: string; stepId: number; receipt: Receipt }>>()

  /** `modelId`: the model this client's sessions are opened for; every receipt must be signed for it. */
  constructor(
    private readonly modelId: string,
    private readonly replays?: ReplayIndex
  ) {}

  /**
   * `receipts` in route order, for hops `route` and the step `step` (its session id, step id and
   * first row's position); the first must hash `sent`, each output must be the next input, the
   * last must hash `received`, and each must be signed for this step's position and the model
   * (issue #39). Throws BadReceiptError naming the hop.
   */
  async check(
    route: ReadonlyArray<{ peerId: string; start: number; end: number }>,
    step: {
      readonly sessionId: string
      /** Each hop's own session id where they differ (per-hop ids on a chain, issue #39); default `sessionId`. */
      readonly sessionIds?: readonly string[]
      readonly stepId: number
      readonly position: number
    },
    receipts: readonly Receipt[],
    sent: Uint8Array,
    received?: Uint8Array
  ): Promise<void> {
    const { stepId } = step
    const base = { stepId, position: step.position, modelId: this.modelId }
    let expectInput = sha256(sent)
    for (let i = 0; i < route.length; i++) {
      const hop = route[i]
      const r = receipts[i]
      const sessionId = step.sessionIds?.[i] ?? step.sessionId
      const signed = { ...base, sessionId }
      const stats = this.byPeer.get(hop.peerId) ?? { checked: 0, invalid: 0 }
      this.byPeer.set(hop.peerId, stats)
      stats.checked++
      this.checked++
      const fail = (why: string): never => {
        stats.invalid++
        this.invalid++
        throw new BadReceiptError(hop.peerId, `receipt of ${hop.peerId} for step ${stepId}: ${why}`)
      }
      if (!r) fail('missing')
      if (r.peerId !== hop.peerId || r.start !== hop.start || r.end !== hop.end) fail('names another peer or span')
      if (!equal(r.inputHash, expectInput)) fail('input hash is not what it was sent')
      if (!(await verifyReceipt(r, signed))) fail('signature does not verify for this step, position and model')
      this.replays?.observe(signed, r)
      const list = this.recent.get(hop.peerId) ?? []
      list.push({ sessionId, stepId, receipt: r })
      if (list.length > 8) list.shift()
      this.recent.set(hop.peerId, list)
      expectInput = r.outputHash
    }
    if (received && !equal(expectInput, sha256(received))) {
      const last = route[route.length - 1]
      const stats = this.byPeer.get(last.peerId)!
      stats.invalid++
      this.invalid++
      throw new BadReceiptError(last.peerId, `receipt of ${last.peerId} for step ${stepId}: output hash is not what it answered`)
    }
  }

  /** The last receipts a peer signed (evidence others can verify with its peer id). */
  evidence(peerId: string): Array<{ sessionId: string; stepId: number; receipt: Receipt }> {
    return [...(this.recent.get(peerId) ?? [])]
  }

  summary(): ReceiptSummary {
    return { checked: this.checked, invalid: this.invalid, byPeer: Object.fromEntries(this.byPeer) }
  }
}

export const EMPTY_RECEIPTS: ReceiptSummary = { checked: 0, invalid: 0, byPeer: {} }

/** Two summaries as one (a generation that recomputed after a rollback checked both). */
export function mergeReceipts(a: ReceiptSummary, b?: ReceiptSummary): ReceiptSummary {
  if (!b) return a
  const byPeer: Record<string, { checked: number; invalid: number }> = { ...a.byPeer }
  for (const [id, s] of Object.entries(b.byPeer)) {
    const t = byPeer[id] ?? { checked: 0, invalid: 0 }
    byPeer[id] = { checked: t.checked + s.checked, invalid: t.invalid + s.invalid }
  }
  return { checked: a.checked + b.checked, invalid: a.invalid + b.invalid, byPeer }
}
