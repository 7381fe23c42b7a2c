/**
 * What a hop checks of a chained step that reaches it from its upstream hop rather than from the
 * client (issue #17). The client's step tag for this hop binds the step's row count and the
 * SHA-256 of the client's own input bytes to the first hop (crypto chainedStepBinding). That hash
 * is the first receipt's input hash; the receipts must chain (each hop's output hash is the next
 * one's input hash) down to the bytes this hop got, and the last one must be the upstream's own,
 * signed for this session, step, position and model. So an upstream can neither pass altered bytes under a valid
 * tag without signing for them, nor reuse a tag with another client input.
 */
import { timingSafeEqual } from 'node:crypto'
import { type SessionRequest, sha256, UnauthorizedError, verifyReceipt } from '../../protocol/index.js'

type Step = Extract<SessionRequest, { type: 'step' }>['step']

function sameHash(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

/** The client's input hash a chained step from `from` (its upstream hop) carries; throws UnauthorizedError. */
export async function upstreamClientInputHash(
  step: Step,
  from: string,
  modelId: string,
  /** The upstream's own session id (per-hop ids on a chain, issue #39); default the step's. */
  upstreamSessionId: string = step.sessionId
): Promise<Uint8Array> {
  const receipts = step.receipts ?? []
  const last = receipts.at(-1)
  if (!last) throw new UnauthorizedError(`step ${step.stepId} from upstream carries no receipt to bind its client tag to`)
  for (let i = 0; i + 1 < receipts.length; i++) {
    if (!sameHash(receipts[i].outputHash, receipts[i + 1].inputHash)) {
      throw new UnauthorizedError(`step ${step.stepId}: the upstream receipts do not chain at hop ${i + 1}`)
    }
  }
  if (last.peerId !== from) throw new UnauthorizedError(`step ${step.stepId}: the last receipt is not the upstream's own`)
  if (!sameHash(last.outputHash, sha256(step.hidden.data))) {
    throw new UnauthorizedError(`step ${step.stepId}: the input is not what the upstream's receipt signed`)
  }
  const signed = { sessionId: upstreamSessionId, stepId: step.stepId, position: step.startPosition, modelId }
  if (!(await verifyReceipt(last, signed))) {
    throw new UnauthorizedError(`step ${step.stepId}: the upstream's receipt signature does not verify`)
  }
  return receipts[0].inputHash
}
