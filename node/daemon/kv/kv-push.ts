/**
 * The source's side of a node-to-node KV move (issue #41 item 1): on the client's KvPush, seal
 * the granted range of the client's own session chunk by chunk and stream the chunks straight
 * to the destination on /layerswarm/kv-move, then answer the client with the destination's reply
 * (its signed receipt, or its coded refusal). The source learns nothing it did not hold: it seals
 * its own KV under the session's snapshot key, and forwards the key the client wrapped for the
 * destination, which it cannot unwrap.
 *
 * A holder (kv-hold.ts) is a source too: asked for a hold it keeps for the client, it forwards the
 * sealed frames as the live hop sent them (it has no key to seal or open them with).
 */
import type { AbortOptions } from '@libp2p/interface'
import {
  BadPositionError,
  createMessageChannel,
  decodeKvMoveResponse,
  encodeKvMoveRequest,
  KV_MOVE_PROTOCOL,
  type KvGrant,
  KvGrantForeignError,
  KvGrantForgedError,
  KvGrantWrongSpanError,
  type KvMoveResponse,
  type KvPush,
  MalformedMessageError,
  NextHopFailedError,
  REQUEST_STREAM_LIMITS,
  verifyKvGrant
} from '../../../protocol/index.js'
import type { HeldFrame } from './kv-hold.js'
import type { KvMoveContext } from './kv-move-context.js'

export async function pushKv(
  ctx: KvMoveContext,
  push: KvPush,
  from: string,
  { signal }: AbortOptions = {}
): Promise<KvMoveResponse> {
  const g = push.grant
  // only the session's owner may move its KV, and only from here
  if (g.clientPeerId !== from) throw new KvGrantForeignError('push refused: the grant is not signed by the peer asking')
  if (g.sourcePeerId !== ctx.peerId) throw new KvGrantForeignError(`push refused: the grant names source ${g.sourcePeerId}`)
  if (!(await verifyKvGrant(g))) throw new KvGrantForgedError('push refused: the grant does not verify')
  if (push.chunkEnds.at(-1) !== g.toPosition)
    throw new MalformedMessageError('push refused: the last chunk must end at to_position')
  const hold = ctx.holds.get(from, g.sourceSessionId, g.start, g.end)
  if (hold) {
    // a holder forwards the whole hold, frame by frame, as the live hop sealed it
    if (g.fromPosition !== 0 || g.toPosition !== hold.length)
      throw new KvGrantWrongSpanError(
        `push refused: the hold covers [0, ${hold.length}), not [${g.fromPosition}, ${g.toPosition})`
      )
    return await sendFrames(ctx, g, push.wrappedKey, hold.frames, hold.sourceSessionId, { signal })
  }
  const session = ctx.sessions.owned(g.sourceSessionId, from)
  const span = session.keys?.span ?? [session.start, session.end]
  if (span[0] !== g.start || span[1] !== g.end)
    throw new KvGrantWrongSpanError(`push refused: session runs [${span[0]}, ${span[1]})`)
  const length = ctx.shard.sessionLength(session.key)
  if (length < g.toPosition)
    throw new BadPositionError(`push refused: the session holds ${length} positions, not ${g.toPosition}`)
  function* sealed(): Generator<HeldFrame> {
    let prev = g.fromPosition
    for (let i = 0; i < push.chunkEnds.length; i++) {
      const to = push.chunkEnds[i]
      if (to <= prev) throw new MalformedMessageError('push refused: chunk ends must go up')
      const s = ctx.crypto.sealKv(session, {
        sessionId: g.sourceSessionId,
        from: prev,
        to,
        sequence: push.firstSequence + i,
        prefixHash: push.chunkPrefixHashes[i],
        delta: prev > 0
      })
      if (s.type !== 'snapshot') throw new MalformedMessageError('push: nothing sealed')
      // sealKv reuses the session's buffer: the frame takes a copy
      yield { snapshots: [s.snapshot.snapshot.slice()], prefixHash: push.chunkPrefixHashes[i] }
      prev = to
    }
  }
  return await sendFrames(ctx, g, push.wrappedKey, sealed(), session.id, { signal })
}

/** Stream the frames to the grant's destination; its reply (a receipt or a refusal) is the push's. */
async function sendFrames(
  ctx: KvMoveContext,
  g: KvGrant,
  wrappedKey: Uint8Array,
  frames: Iterable<HeldFrame>,
  sessionId: string,
  { signal }: AbortOptions
): Promise<KvMoveResponse> {
  let target: Awaited<ReturnType<typeof ctx.nextHops.resolve>>
  try {
    // dialled at addresses this node knows for the peer (next-hop-policy.ts), never the client's
    target = await ctx.nextHops.resolve({ peerId: g.destinationPeerId, addrs: [], start: g.start, end: g.end }, { signal })
  } catch (err) {
    throw new NextHopFailedError(`destination ${g.destinationPeerId} unreachable: ${(err as Error).message}`)
  }
  const stream = await ctx.host.dialProtocol(target, KV_MOVE_PROTOCOL, { signal, ...REQUEST_STREAM_LIMITS })
  const channel = createMessageChannel(stream)
  // the destination may refuse after the grant frame: its reply is read while chunks go out
  const replyP = channel.read({ signal })
  replyP.catch(() => {})
  const send = async (bytes: Uint8Array): Promise<Uint8Array | null | undefined> => {
    const w = channel.write(bytes, { signal })
    w.catch(() => {})
    return await Promise.race([w.then(() => undefined), replyP.then((b) => b ?? null)])
  }
  try {
    let early = await send(
      encodeKvMoveRequest({ type: 'transfer', transfer: { grant: g, wrappedKey, snapshots: [], prefixHash: g.prefixHash } })
    )
    let bytes = 0
    for (const f of frames) {
      if (early !== undefined) break
      for (const s of f.snapshots) bytes += s.length
      early = await send(
        encodeKvMoveRequest({ type: 'transfer', transfer: { snapshots: f.snapshots, prefixHash: f.prefixHash } })
      )
    }
    if (early === undefined) await channel.close({ signal })
    const reply = early === undefined ? await replyP : early
    if (!reply) throw new NextHopFailedError(`destination ${g.destinationPeerId} closed without a reply`)
    const r = decodeKvMoveResponse(reply)
    if (early !== undefined) stream.abort(new MalformedMessageError('the destination answered before the transfer ended'))
    ctx.log?.({
      event: 'kv-sent',
      to: g.destinationPeerId,
      sessionId,
      positions: [g.fromPosition, g.toPosition],
      bytes,
      reply: r.type
    })
    return r
  } catch (err) {
    stream.abort(err as Error)
    throw err
  }
}
