/**
 * Both ends of a /layerswarm/session/1.0.0 stream (docs/design.md §2, docs/protocol.md): one long-lived stream
 * per hop per session, one MessageChannel on it. The caller's end is in session-caller.ts.
 *
 * - Caller (client, or a hop forwarding in chained mode): numbers requests from 1 and
 *   matches each SessionResponse to its request by request_id; calls may be pipelined.
 * - Server (node): reads requests in order and answers each exactly once, in order; any
 *   failure becomes a typed ErrorReply, so a bad request never kills the peer (§9.4).
 * - A response with request_id 0 is a stream-level error (an unparseable or oversized
 *   frame): the caller fails every pending call with it and the stream is finished.
 */
import type { AbortOptions, Stream } from '@libp2p/interface'
import { linkSignals } from './abort-link.js'
import { ProtocolError, RequestTimeoutError } from './errors.js'
import { createMessageChannel, type MessageChannelInit } from './framing.js'
import { STREAM_CLOSE_TIMEOUT_MS } from './limits.js'
import { type DecodeOptions, errorReplyFor } from './messages.js'
import { decodeSessionRequest } from './session-request-codec.js'
import { encodeSessionResponse } from './session-response-codec.js'
import { stepTrace } from './step-trace.js'
import type { SessionRequest, SessionResponse, SessionResponseBody } from './types.js'
import { peekVarintField } from './wire-scan.js'

export interface SessionStreamInit extends MessageChannelInit {
  maxTensorElements?: number
  /** Per-body size caps checked before decoding (DecodeOptions.maxBodyBytes). */
  maxBodyBytes?: DecodeOptions['maxBodyBytes']
}

/** Resolves when the stream closes (both sides) or `signal` aborts. */
async function untilClosed(stream: Stream, signal: AbortSignal): Promise<void> {
  if (stream.status !== 'open' || signal.aborted) return
  await new Promise<void>((resolve) => {
    const done = (): void => {
      stream.removeEventListener('close', done)
      signal.removeEventListener('abort', done)
      resolve()
    }
    stream.addEventListener('close', done)
    signal.addEventListener('abort', done)
  })
}

export interface SessionServerInit extends SessionStreamInit {
  /** Our peer id, reported in ErrorReply.peer_id. */
  peerId?: string
  signal?: AbortSignal
  /** Called for every request that failed (after its ErrorReply was sent). */
  onError?(err: Error, request?: SessionRequest): void
  /**
   * Called with each frame's size before it is decoded; throwing (e.g. a per-peer rate limit's
   * BusyError) refuses that request with the error and keeps the stream.
   */
  admit?(frameBytes: number): void
}

/**
 * A handler's answer to a one-way request: nothing now; if `failure` rejects, its error goes
 * back as an ErrorReply with the request's id (after answers to later requests, perhaps).
 */
export interface NoReply {
  type: 'noReply'
  failure: Promise<void>
}

export type SessionRequestHandler = (request: SessionRequest, options?: AbortOptions) => Promise<SessionResponseBody | NoReply>

/**
 * Serves one session stream until the caller closes it. Requests are handled one at a
 * time in arrival order (a session's steps are sequential by nature). Resolves when the
 * stream is done; never throws.
 */
export async function serveSessionStream(
  stream: Stream,
  handler: SessionRequestHandler,
  init: SessionServerInit = {}
): Promise<void> {
  const { signal } = init
  const channel = createMessageChannel(stream, init)
  const reply = async (res: SessionResponse): Promise<void> => {
    await channel.write(encodeSessionResponse(res), { signal })
  }
  let refused = false
  try {
    while (true) {
      let bytes: Uint8Array | undefined
      try {
        bytes = await channel.read({ signal })
      } catch (err) {
        // the caller reset or abandoned the stream: it went away, which is no failed request
        if (!(err instanceof ProtocolError)) {
          channel.abort(err as Error)
          return
        }
        // oversized or truncated frame: framing is lost, answer at stream level and stop
        await reply({ requestId: 0, type: 'error', error: errorReplyFor(err, { peerId: init.peerId }) })
        init.onError?.(err)
        refused = true
        break
      }
      if (bytes === undefined) break
      let req: SessionRequest | undefined
      try {
        try {
          init.admit?.(bytes.byteLength)
        } catch (err) {
          const requestId = peekVarintField(bytes, 1)
          if (err instanceof ProtocolError && requestId !== undefined && Number.isSafeInteger(requestId) && requestId > 0)
            err.requestId = requestId
          throw err
        }
        req = decodeSessionRequest(bytes, {
          maxMessageBytes: channel.maxMessageBytes,
          maxTensorElements: init.maxTensorElements,
          maxBodyBytes: init.maxBodyBytes
        })
        const traceId = req.type === 'step' ? req.step.stepId : req.type === 'await' ? req.await.stepId : req.requestId
        stepTrace(`server-got-${req.type}`, traceId)
        const body = await handler(req, { signal })
        stepTrace(`server-reply-${req.type}`, traceId)
        if (body.type === 'noReply') {
          const failed = req
          body.failure.catch(async (err: Error) => {
            try {
              await reply({
                requestId: failed.requestId,
                type: 'error',
                error: errorReplyFor(err, { peerId: init.peerId, stepId: traceId })
              })
            } catch {
              // the stream is gone: the caller learns of it that way
            }
            init.onError?.(err, failed)
          })
          continue
        }
        await reply({ requestId: req.requestId, ...body } as SessionResponse)
        stepTrace(`server-replied-${req.type}`, traceId)
      } catch (err) {
        const requestId = req?.requestId ?? (err as ProtocolError).requestId ?? 0
        const stepId = req?.type === 'step' ? req.step.stepId : undefined
        await reply({ requestId, type: 'error', error: errorReplyFor(err, { peerId: init.peerId, stepId }) })
        init.onError?.(err as Error, req)
        if (requestId === 0) {
          refused = true
          break
        }
      }
    }
    if (refused) {
      // We read no more: drop what the peer sent after the refused frame and stop buffering what
      // it still sends; a peer that never closed its side kept the stream, and every byte it
      // wrote after, until it left (issue #17: the fuzzer's node grew by 1 GiB of such buffers).
      const { stream } = channel
      if (stream.readStatus !== 'closed' && stream.readStatus !== 'closing') await stream.closeRead().catch(() => {})
      const t = AbortSignal.timeout(STREAM_CLOSE_TIMEOUT_MS)
      const closing = linkSignals([signal, t])
      await channel.close({ signal: closing.signal }).catch((err: Error) => channel.abort(err))
      closing.clear()
      // yamux has no "stop sending": a peer that keeps its side open keeps the stream (though what
      // it sends is dropped), so the stream is reset once the peer had time to read our reply
      await untilClosed(stream, t)
      if (stream.status === 'open') channel.abort(new RequestTimeoutError('stream not closed after a refused frame'))
      return
    }
    await channel.close({ signal })
  } catch (err) {
    channel.abort(err as Error)
    init.onError?.(err as Error)
  }
}
