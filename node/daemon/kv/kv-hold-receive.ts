/**
 * A holder's side of a transfer (issue #41 item 3): a checked grant whose destination session is
 * `KV_HOLD_SESSION_ID` adds the live hop's sealed frames to the client's hold of that session and
 * span (kv-hold.ts). The holder cannot open them (no key is wrapped for it); it checks what it
 * can: the grant (kv-grant-check.ts, before this), that the range continues the hold, that the
 * frames stay within the granted range's KV size and the node's KV budget, and that the last
 * frame ends at the prefix the client granted. It signs a receipt of what it holds.
 */
import type { AbortOptions } from '@libp2p/interface'
import {
  decodeKvMoveRequest,
  type KvGrant,
  type KvMoveResponse,
  type KvTransfer,
  MalformedMessageError,
  type MessageChannel,
  signKvReceipt
} from '../../../protocol/index.js'
import type { SeenGrants } from './kv-grant-check.js'
import type { HeldFrame } from './kv-hold.js'
import { FRAME_SLACK_BYTES, type KvMoveContext, SEAL_SLACK_BYTES } from './kv-move-context.js'

export async function receiveHold(
  ctx: KvMoveContext,
  seen: SeenGrants,
  channel: MessageChannel,
  grant: KvGrant,
  first: KvTransfer,
  setCap: (bytes: number) => void,
  { signal }: AbortOptions = {}
): Promise<KvMoveResponse> {
  const { hold, fresh } = ctx.holds.begin(grant)
  seen.add(grant.grantId, grant.expiresAtMs)
  const c = ctx.shard.config
  const positions = grant.toPosition - grant.fromPosition
  // f32 keys and values of the granted span: the most a position's sealed KV can take
  const granted = positions * (grant.end - grant.start) * 2 * c.nKvHeads * c.headDim * 4
  setCap(Math.min(channel.maxMessageBytes, granted + FRAME_SLACK_BYTES))
  const frames: HeldFrame[] = []
  let received = 0
  let next: KvTransfer | undefined = first.snapshots.length > 0 ? first : undefined
  for (;;) {
    if (next) {
      for (const s of next.snapshots) received += s.length
      if (received > granted + SEAL_SLACK_BYTES * (positions + 1))
        throw new MalformedMessageError(
          `kv-move: more sealed bytes than positions [${grant.fromPosition}, ${grant.toPosition}) hold`
        )
      ctx.holds.reserve(received)
      frames.push({ snapshots: next.snapshots.map((s) => s.slice()), prefixHash: next.prefixHash.slice() })
    }
    const bytes = await channel.read({ signal })
    if (bytes === undefined) break
    const r = decodeKvMoveRequest(bytes, channel.maxMessageBytes)
    if (r.type !== 'transfer' || r.transfer.grant !== undefined)
      throw new MalformedMessageError('kv-move: after the grant, only transfer frames without a grant')
    next = r.transfer
  }
  const last = frames.at(-1)?.prefixHash
  if (!last || last.length !== grant.prefixHash.length || !last.every((b, i) => b === grant.prefixHash[i]))
    throw new MalformedMessageError(`kv-move: the transfer does not end at the prefix granted for ${grant.toPosition}`)
  ctx.holds.commit(grant, hold, frames, received, fresh)
  const receipt = await signKvReceipt(
    {
      grantId: grant.grantId,
      destinationPeerId: ctx.peerId,
      destinationSessionId: grant.destinationSessionId,
      length: hold.length,
      // a hold counts the sealed snapshots it keeps: the live hop's sequences run from 1
      sequence: hold.frames.reduce((n, f) => n + f.snapshots.length, 0),
      bytes: received
    },
    ctx.identity
  )
  ctx.log?.({ event: 'kv-held', from: grant.sourcePeerId, positions: hold.length, bytes: received, held: hold.bytes })
  return { type: 'receipt', receipt }
}
