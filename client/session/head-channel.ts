/**
 * Issue #35: how a step asks the head of the last block's hop and where its sealed reply lands.
 * The remote-head sampler (client/head/) sets `request` before a step; the step transport sends
 * it with the step to the route's last hop and keeps the reply here with what opens it: that
 * hop's session keys and the step's id, position and rows (the AAD of crypto/head-seal.ts).
 */
import type { HopKeys } from '../../crypto/index.js'
import type { HeadRequest } from '../../protocol/index.js'
import { MalformedMessageError } from '../../protocol/index.js'

export interface HeadReplyRecord {
  readonly sealed: Uint8Array
  readonly keys: HopKeys
  /** The last hop's session id and peer id (bound in the reply's AAD). */
  readonly sessionId: string
  readonly hopPeerId: string
  readonly stepId: number
  readonly position: number
  /** Rows the reply holds: every row of the step (allRows), else 1. */
  readonly rows: number
}

export class HeadChannel {
  /** What the next step asks of the head; undefined: no head (today's client head). */
  request?: HeadRequest
  private reply?: HeadReplyRecord

  /** The transport's record of the last step's reply (a failed-over retry replaces it). */
  put(reply: HeadReplyRecord): void {
    this.reply = reply
  }

  /** The reply of the step just run; MalformedMessageError when its last hop sent none. */
  take(): HeadReplyRecord {
    const r = this.reply
    this.reply = undefined
    if (!r) throw new MalformedMessageError('the last hop answered a step that asked the head without a sealed head')
    return r
  }
}

/** The record of a step's head reply, or undefined when the channel asked none. */
export function headRecord(
  channel: HeadChannel | undefined,
  hop: { keys: HopKeys; sessionId: string; target: { peerId: string } },
  step: { stepId: number; position: number; rows: number },
  sealed: Uint8Array | undefined
): void {
  const req = channel?.request
  if (!channel || !req) return
  if (!sealed)
    throw new MalformedMessageError(`hop ${hop.target.peerId} answered a step that asked the head without a sealed head`)
  const rows = req.allRows ? step.rows : 1
  channel.put({ sealed, keys: hop.keys, sessionId: hop.sessionId, hopPeerId: hop.target.peerId, ...step, rows })
}
