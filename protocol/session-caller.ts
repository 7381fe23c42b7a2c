/**
 * The caller's end of a /layerswarm/session/1.0.0 stream (session-stream.ts has the protocol's
 * rules and the server's end): requests numbered from 1, responses matched by request_id.
 */
import type { AbortOptions, Stream } from '@libp2p/interface'
import { MalformedMessageError, NextHopFailedError, ProtocolError } from './errors.js'
import { createMessageChannel, type MessageChannel } from './framing.js'
import { errorFromReply } from './messages.js'
import { encodeSessionRequest } from './session-request-codec.js'
import { decodeSessionResponse } from './session-response-codec.js'
import type { SessionStreamInit } from './session-stream.js'
import { stepTrace } from './step-trace.js'
import type { SessionRequest, SessionRequestBody, SessionResponse } from './types.js'

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
