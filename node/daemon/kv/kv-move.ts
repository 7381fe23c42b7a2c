/**
 * /layerswarm/kv-move/1.0.0 on a node (issue #41): KV moves node to node under the client's
 * grant, and the client's link carries none of it. Two roles on one protocol:
 * - source: its client sends a KvPush (a signed grant, the snapshot key the client wrapped for
 *   the destination, chunk ends and their prefix hashes); the node seals the range of the
 *   client's session chunk by chunk (SessionCrypto.sealKv, as ExportKv) and streams it straight
 *   to the destination, then hands the client the destination's signed receipt;
 * - destination: checks the grant against the connection's remote peer id (kv-grant-check.ts)
 *   before a frame of KV is read, then imports every frame through SessionCrypto.openKv (tag and
 *   every bound field first), and signs a receipt of what the session then holds.
 * A source whose transfers are refused is recorded and limited like a hostile peer
 * (kv-source-limits.ts). Held bytes: a transfer frame is capped by the granted range's KV size
 * and reserved in the node's budget of bytes in flight, and it lands in the destination
 * session's KV, which was counted against the node's KV caps when the client opened it.
 */
import type { Stream } from '@libp2p/interface'
import {
  createMessageChannel,
  decodeKvMoveRequest,
  encodeKvMoveResponse,
  errorReplyFor,
  isKvHold,
  KV_MOVE_PROTOCOL,
  type KvMoveResponse,
  MAX_CONTROL_BYTES,
  MalformedMessageError,
  REQUEST_STREAM_LIMITS,
  signKvReceipt
} from '../../../protocol/index.js'
import { checkGrant, checkGrantSession, SeenGrants } from './kv-grant-check.js'
import { KvHoldStore } from './kv-hold.js'
import { receiveHold } from './kv-hold-receive.js'
import { FRAME_SLACK_BYTES, type KvMoveContext, type KvMoveInit, SEAL_SLACK_BYTES } from './kv-move-context.js'
import { pushKv } from './kv-push.js'
import { KvSourceLimits } from './kv-source-limits.js'

export type { KvMoveContext, KvMoveInit }

import { createNextHopPolicy } from '../next-hop-policy.js'

export async function serveKvMove(init: KvMoveInit): Promise<void> {
  const { host, announcements } = init
  const { shard, sessions } = init
  const c = shard.config
  // f32 keys and values of every block of this node's span: the most one position of its KV takes
  const bytesPerToken = (shard.end - shard.start) * 2 * c.nKvHeads * c.headDim * 4
  const holds = new KvHoldStore({ freeTokens: () => sessions.freeCacheTokens, bytesPerToken })
  sessions.heldTokens = () => holds.tokens
  const nextHops = createNextHopPolicy({ host, announcements })
  const ctx: KvMoveContext = { ...init, peerId: host.peerId.toString(), nextHops, holds }
  const limits = new KvSourceLimits()
  const seen = new SeenGrants()
  await host.handle(
    KV_MOVE_PROTOCOL,
    async (stream, connection) => {
      const from = connection.remotePeer.toString()
      await serveStream(ctx, limits, seen, stream, from).catch(() => {})
    },
    REQUEST_STREAM_LIMITS
  )
}

async function serveStream(ctx: KvMoveContext, limits: KvSourceLimits, seen: SeenGrants, stream: Stream, from: string) {
  const { signal } = ctx
  // after the first frame (a push, or a transfer's grant), frames are capped by the granted range
  let cap = MAX_CONTROL_BYTES
  const channel = createMessageChannel(stream, { frameCap: () => cap, budget: ctx.budget })
  const reply = async (r: KvMoveResponse): Promise<void> => {
    await channel.write(encodeKvMoveResponse(r), { signal })
    await channel.close({ signal })
  }
  let role: 'push' | 'transfer' | undefined
  try {
    limits.admit(from)
    const first = await channel.read({ signal })
    if (first === undefined) throw new MalformedMessageError('kv-move: stream closed without a request')
    const req = decodeKvMoveRequest(first, MAX_CONTROL_BYTES)
    role = req.type
    if (req.type === 'push') {
      await reply(await pushKv(ctx, req.push, from, { signal }))
      return
    }
    const t = req.transfer
    const grant = await checkGrant(ctx, seen, t.grant, t.wrappedKey, from)
    if (isKvHold(grant)) {
      await reply(await receiveHold(ctx, seen, channel, grant, t, (bytes) => (cap = bytes), { signal }))
      return
    }
    const session = ctx.sessions.owned(grant.destinationSessionId, grant.clientPeerId)
    checkGrantSession(grant, session, ctx.shard.sessionLength(session.key))
    seen.add(grant.grantId, grant.expiresAtMs)
    const perPosition = ctx.shard.kvBytesPerPosition(session.key)
    const granted = (grant.toPosition - grant.fromPosition) * perPosition
    cap = Math.min(channel.maxMessageBytes, granted + FRAME_SLACK_BYTES)
    ctx.sessions.used(session)
    ctx.sessions.checkGrowth(session, grant.toPosition) // KV held as it is filled (issue #39)
    let received = 0
    let frames = t.snapshots.length > 0 ? [t] : []
    for (;;) {
      for (const f of frames) {
        for (const s of f.snapshots) received += s.length
        // every frame of one grant together holds at most the granted range, sealed
        if (received > granted + SEAL_SLACK_BYTES * (grant.toPosition - grant.fromPosition + 1))
          throw new MalformedMessageError(
            `kv-move: more sealed bytes than positions [${grant.fromPosition}, ${grant.toPosition}) hold`
          )
        const length = ctx.shard.sessionLength(session.key)
        ctx.crypto.openKv(session, {
          sessionId: grant.destinationSessionId,
          wrappedKey: t.wrappedKey!,
          snapshots: [...f.snapshots],
          snapshotSessionId: grant.sourceSessionId,
          prefixHash: f.prefixHash,
          append: length > 0
        })
        if (ctx.shard.sessionLength(session.key) > grant.toPosition) {
          ctx.sessions.close(session)
          throw new MalformedMessageError(`kv-move: the snapshots go past the granted position ${grant.toPosition}`)
        }
      }
      const next = await channel.read({ signal })
      if (next === undefined) break
      const r = decodeKvMoveRequest(next, cap)
      if (r.type !== 'transfer' || r.transfer.grant !== undefined)
        throw new MalformedMessageError('kv-move: after the grant, only transfer frames without a grant')
      frames = [r.transfer]
    }
    const length = ctx.shard.sessionLength(session.key)
    const k = session.keys
    // the last frame's prefix hash was checked against its seal; it must be the one the client granted
    if (length !== grant.toPosition || !k?.imported || !sameHash(frames.at(-1)?.prefixHash, grant.prefixHash)) {
      ctx.sessions.close(session)
      throw new MalformedMessageError(`kv-move: the transfer ended at ${length}, the grant is for ${grant.toPosition}`)
    }
    const receipt = await signKvReceipt(
      {
        grantId: grant.grantId,
        destinationPeerId: ctx.peerId,
        destinationSessionId: grant.destinationSessionId,
        length,
        sequence: k.imported.sequence,
        bytes: received
      },
      ctx.identity
    )
    ctx.log?.({ event: 'kv-received', from, sessionId: session.id, positions: length, bytes: received })
    await reply({ type: 'receipt', receipt })
  } catch (err) {
    const error = errorReplyFor(err, { peerId: ctx.peerId })
    // a refused transfer counts against its source; a push's own failure is the client's business
    if (role !== 'push') limits.refused(from, error.code)
    ctx.metrics?.error(error.code)
    ctx.log?.({ event: 'kv-move-refused', from, role, code: error.code, message: error.message })
    try {
      await reply({ type: 'error', error })
    } catch {
      stream.abort(err as Error)
    }
  }
}

function sameHash(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && a.length === b.length && a.every((x, i) => x === b[i])
}
