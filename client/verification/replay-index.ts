import { CanaryArgumentError } from '../../canary/errors.js'
import { type Receipt, type ReceiptStep, verifyReceipt } from '../../protocol/index.js'

/*
 * Replay, proven by a peer's own receipts. A hop signs Sign(sessionId, stepId, span, position,
 * modelId, H(input), H(output)) for every step (protocol/receipt.ts). A transformer span's output is a function of
 * its input and its KV cache, in floats; two different inputs giving bit-identical outputs does
 * not happen in practice (for a 64-dim f32 row that is 2048 bits agreeing by chance). So two
 * receipts of one peer with the same output hash and different input hashes are evidence,
 * checkable by anyone with the peer id alone, that the peer returned an output it had computed
 * for something else: the `replay` tamper mode, caught on the first replayed step whose original
 * this client saw, canary or not. Equal outputs for equal inputs are legitimate and do not count:
 * a retried step, a failover's replay of the same rows, a decoy re-sending a canary's rows; so
 * are equal outputs of different spans (blocks [1, 4) and [2, 4) of one prompt end alike).
 */

/** A step as its receipt names it: enough for anyone to check the signature. */
export interface SignedStep extends ReceiptStep {
  readonly receipt: Receipt
}

/** Why a peer was excluded by its receipts: one output signed for two different inputs. */
export interface ReplayEvidence {
  readonly peerId: string
  readonly why: 'replayed-output'
  /** The step the output was first signed for. */
  readonly original: SignedStep
  /** The later step the same output was signed for, with a different input. */
  readonly replayed: SignedStep
}

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex')

/** Output hashes remembered per peer; the oldest go first (a replay of something older goes unseen). */
export const DEFAULT_REPLAY_WINDOW = 4096

/**
 * Per peer, the last `window` output hashes it signed and the input each was for. Feed it only
 * receipts whose signature has been verified (ReceiptLedger does). A collision convicts the peer
 * once: `takeConvicted` hands it to the exclusion path, `evidence` keeps both receipts.
 */
export class ReplayIndex {
  private readonly byPeer = new Map<string, Map<string, SignedStep>>()
  private readonly convicted = new Set<string>()
  private readonly pending: string[] = []
  readonly evidence: ReplayEvidence[] = []

  constructor(readonly window = DEFAULT_REPLAY_WINDOW) {
    if (!Number.isSafeInteger(window) || window < 1)
      throw new CanaryArgumentError(`replay window must be a positive integer, got ${window}`)
  }

  /** A verified receipt of `receipt.peerId`: its evidence when it replays an earlier output, else undefined. */
  observe(signed: ReceiptStep, receipt: Receipt): ReplayEvidence | undefined {
    const peerId = receipt.peerId
    let seen = this.byPeer.get(peerId)
    if (!seen) this.byPeer.set(peerId, (seen = new Map()))
    // keyed by span too: one prompt through [a, e) and through a later sub-span [b, e) ends in the
    // same hidden state from different inputs, honestly (routes split spans differently over time)
    const key = `${receipt.start}:${receipt.end}:${hex(receipt.outputHash)}`
    const earlier = seen.get(key)
    const { sessionId, stepId, position, modelId } = signed
    const step = { sessionId, stepId, position, modelId, receipt }
    if (earlier && hex(earlier.receipt.inputHash) !== hex(receipt.inputHash)) {
      if (this.convicted.has(peerId)) return undefined
      const e: ReplayEvidence = { peerId, why: 'replayed-output', original: earlier, replayed: step }
      this.convicted.add(peerId)
      this.pending.push(peerId)
      this.evidence.push(e)
      return e
    }
    // Map order is insertion order: re-inserting keeps a re-sent output fresh, and the first key is the oldest.
    seen.delete(key)
    seen.set(key, step)
    if (seen.size > this.window) seen.delete(seen.keys().next().value as string)
    return undefined
  }

  /** Peers convicted since the last call. */
  takeConvicted(): string[] {
    return this.pending.splice(0)
  }

  isConvicted(peerId: string): boolean {
    return this.convicted.has(peerId)
  }
}

/**
 * Checks replay evidence as a third party would: both receipts signed by the peer (under its peer
 * id), the same output hash, different input hashes.
 */
export async function verifyReplayEvidence(e: ReplayEvidence): Promise<boolean> {
  const { original: a, replayed: b } = e
  if (a.receipt.peerId !== e.peerId || b.receipt.peerId !== e.peerId) return false
  if (hex(a.receipt.outputHash) !== hex(b.receipt.outputHash)) return false
  if (hex(a.receipt.inputHash) === hex(b.receipt.inputHash)) return false
  return (await verifyReceipt(a.receipt, a)) && (await verifyReceipt(b.receipt, b))
}
