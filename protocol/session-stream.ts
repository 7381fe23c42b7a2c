/**
 * Both ends of a /layerswarm/session/1.0.0 stream (DESIGN.md §2-3): one long-lived stream
 * per hop per session, one MessageChannel on it.
 *
 * - Caller (client, or a hop forwarding in chained mode): numbers requests from 1 and
 *   matches each SessionResponse to its request by request_id; calls may be pipelined.
 * - Server (node): reads requests in order and answers each exactly once, in order; any
 *   failure becomes a typed ErrorReply, so a bad request never kills the peer (§9.4).
 * - A response with request_id 0 is a stream-level error (an unparseable or oversized
 *   frame): the caller fails every pending call with it and the stream is finished.
 */
import type { AbortOptions, Stream } from '@libp2p/interface'
import { MalformedMessageError, NextHopFailedError, ProtocolError, RequestTimeoutError } from './errors.js'
import { createMessageChannel, type MessageChannel, type MessageChannelInit } from './framing.js'
import { STREAM_CLOSE_TIMEOUT_MS } from './limits.js'
import { type DecodeOptions, errorFromReply, errorReplyFor } from './messages.js'
import { decodeSessionRequest, encodeSessionRequest } from './session-request-codec.js'
import { decodeSessionResponse, encodeSessionResponse } from './session-response-codec.js'
import { stepTrace } from './step-trace.js'
import type { SessionRequest, SessionRequestBody, SessionResponse, SessionResponseBody } from './types.js'
import { peekVarintField } from './wire-scan.js'

export interface SessionStreamInit extends MessageChannelInit {
  maxTensorElements?: number
  /** Per-body size caps checked before decoding (DecodeOptions.maxBodyBytes). */
  maxBodyBytes?: DecodeOptions['maxBodyBytes']
}

export interface SessionCaller {
  readonly channel: MessageChannel
  /** Requests sent but not yet answered. */
  readonly pending: number
  /**
   * Sends one request and resolves with its response. An ErrorReply rejects with a
   * RemoteError (code, peerId, stepId); a dead stream rejects with NextHopFailedError.
   */
  call(body: SessionRequestBody, options?: AbortOptions): Promise<Exclude<SessionResponse, { type: 'error' }>>
  /**
   * Sends a request the peer answers only if it fails (a chained one-way step); resolves once
   * written. `failed` rejects with the peer's ErrorReply (a RemoteError) or the stream's death
   * until settle(requestId) forgets the request; it never resolves. Only the newest
   * MAX_ONE_WAY_PENDING requests are remembered.
   */
  send(body: SessionRequestBody, options?: AbortOptions): Promise<{ requestId: number; failed: Promise<never> }>
  /** Forget a one-way request that succeeded (its answer came another way). */
  settle(requestId: number): void
  /** Closes our writable side; responses to pending calls are still delivered. */
  close(options?: AbortOptions): Promise<void>
  /** Resets the stream and fails pending calls. */
  abort(err: Error): void
}

/** One-way requests remembered for their late ErrorReply (a chain has a few in flight at most). */
export const MAX_ONE_WAY_PENDING = 32

interface Pending {
  resolve(res: SessionResponse): void
  reject(err: Error): void
}

export function createSessionCaller(stream: Stream, init: SessionStreamInit = {}): SessionCaller {
  const channel = createMessageChannel(stream, init)
  const pending = new Map<number, Pending>()
  const oneWay = new Map<number, (err: Error) => void>()
  let nextId = 1
  let failure: Error | undefined
  let reading = false

  const failAll = (err: Error): void => {
    failure ??= err
    for (const p of pending.values()) p.reject(failure)
    pending.clear()
    for (const reject of oneWay.values()) reject(failure)
    oneWay.clear()
  }

  const readLoop = async (): Promise<void> => {
    try {
      while (pending.size > 0 || oneWay.size > 0) {
        const bytes = await channel.read()
        if (bytes === undefined) throw new NextHopFailedError('session stream closed by the remote peer')
        const res = decodeSessionResponse(bytes, {
          maxMessageBytes: channel.maxMessageBytes,
          maxTensorElements: init.maxTensorElements,
          maxBodyBytes: init.maxBodyBytes
        })
        if (res.requestId === 0) {
          throw res.type === 'error' ? errorFromReply(res.error, 0) : new MalformedMessageError('response with request_id 0')
        }
        stepTrace(`caller-got-${res.type}`, res.type === 'result' ? res.result.stepId : res.requestId)
        const p = pending.get(res.requestId)
        if (p === undefined) {
          const reject = oneWay.get(res.requestId)
          if (reject !== undefined && res.type === 'error') {
            oneWay.delete(res.requestId)
            reject(errorFromReply(res.error, res.requestId))
          }
          continue // an aborted call's or a settled one-way request's late answer
        }
        pending.delete(res.requestId)
        p.resolve(res)
      }
    } catch (err) {
      const e =
        err instanceof ProtocolError
          ? err
          : new NextHopFailedError(`session stream failed: ${(err as Error).message}`, { cause: err })
      failAll(e)
      channel.abort(e)
    } finally {
      reading = false
    }
  }

  return {
    channel,
    get pending() {
      return pending.size
    },

    async call(body, { signal } = {}) {
      if (failure !== undefined) throw failure
      signal?.throwIfAborted()
      const requestId = nextId++
      stepTrace(
        `caller-send-${body.type}`,
        body.type === 'step' ? body.step.stepId : body.type === 'await' ? body.await.stepId : requestId
      )
      const bytes = encodeSessionRequest({ requestId, ...body } as SessionRequest)
      let resolve!: (res: SessionResponse) => void
      let reject!: (err: Error) => void
      const promise = new Promise<SessionResponse>((res, rej) => {
        resolve = res
        reject = rej
      })
      // Rejected by an abort or a dead stream while the write below is still pending, the
      // promise is never awaited: mark it handled, or the rejection kills the whole process.
      promise.catch(() => {})
      pending.set(requestId, { resolve, reject })
      const onAbort = (): void => {
        pending.delete(requestId)
        reject(signal?.reason as Error)
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      try {
        if (!reading) {
          reading = true
          void readLoop()
        }
        try {
          await channel.write(bytes, { signal })
          stepTrace(`caller-sent-${body.type}`, requestId)
        } catch (err) {
          // a local refusal (too large) or our own abort leaves the stream intact
          if (err instanceof ProtocolError || signal?.aborted === true) throw err
          const e = new NextHopFailedError(`session stream failed: ${(err as Error).message}`, { cause: err })
          failAll(e)
          channel.abort(e)
          throw e
        }
        const res = await promise
        if (res.type === 'error') throw errorFromReply(res.error, requestId)
        return res
      } catch (err) {
        pending.delete(requestId)
        throw err
      } finally {
        signal?.removeEventListener('abort', onAbort)
      }
    },

    async send(body, { signal } = {}) {
      if (failure !== undefined) throw failure
      signal?.throwIfAborted()
      const requestId = nextId++
      stepTrace(`caller-send-${body.type}`, body.type === 'step' ? body.step.stepId : requestId)
      const bytes = encodeSessionRequest({ requestId, ...body } as SessionRequest)
      let reject!: (err: Error) => void
      const failed = new Promise<never>((_, rej) => {
        reject = rej
      })
      failed.catch(() => {}) // a caller that settled or stopped listening must not crash the process
      oneWay.set(requestId, reject)
      for (const id of oneWay.keys()) if (oneWay.size > MAX_ONE_WAY_PENDING) oneWay.delete(id)
      if (!reading) {
        reading = true
        void readLoop()
      }
      try {
        await channel.write(bytes, { signal })
      } catch (err) {
        oneWay.delete(requestId)
        if (err instanceof ProtocolError || signal?.aborted === true) throw err
        const e = new NextHopFailedError(`session stream failed: ${(err as Error).message}`, { cause: err })
        failAll(e)
        channel.abort(e)
        throw e
      }
      return { requestId, failed }
    },

    settle(requestId) {
      oneWay.delete(requestId)
    },

    async close({ signal } = {}) {
      oneWay.clear() // closing: the session is over, late failures of its steps do not matter
      await channel.close({ signal })
    },

    abort(err) {
      failAll(err)
      channel.abort(err)
    }
  }
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
      await channel.close({ signal: signal ? AbortSignal.any([signal, t]) : t }).catch((err: Error) => channel.abort(err))
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
