/**
 * Fuzzing a real client (issue #17): a hostile peer answers the client's session requests and
 * info requests with fuzz frames. The client's SessionCaller (with the reply caps a HopSession
 * uses) and fetchInfo must resolve or reject with a typed error for every reply, and nothing may
 * reject unhandled.
 */
import type { Stream } from '@libp2p/interface'
import {
  createHost,
  createMessageChannel,
  createSessionCaller,
  DEFAULT_MAX_MESSAGE_BYTES,
  encodeTensor,
  fetchInfo,
  type Host,
  INFO_PROTOCOL,
  MAX_CONTROL_BYTES,
  ProtocolError,
  peekVarintField,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller,
  STEP_SLACK_BYTES,
  tensorByteLength
} from '../../protocol/index.js'
import { createRng, encode, type FrameContext, generate, mutate } from './frames.js'
import { reflected } from './reflection.js'

export interface ClientFuzzOptions {
  /** Hostile session replies; info replies are a tenth of these. */
  readonly replies: number
  readonly seed: number
  readonly log?: (line: string) => void
  /** Stops the run early (SIGINT/SIGTERM): the summary counts the replies sent. */
  readonly signal?: AbortSignal
}

export interface ClientFuzzSummary {
  readonly target: 'client'
  readonly seed: number
  /** Hostile session replies the client got (all `replies` unless stopped early). */
  readonly sessionReplies: number
  readonly infoReplies: number
  readonly stoppedEarly: boolean
  readonly repliesPerSecond: number
  readonly outcomes: Record<string, number>
  /** Rejections that were not typed errors (a ProtocolError or an error with a code). */
  readonly untypedErrors: number
  /** Streams or connections the hostile peer broke before a request could be sent (retried). */
  readonly dialFailures: number
  readonly unhandledRejections: number
  readonly seconds: number
}

const DIM = 64
const MAX_LENGTH = 64
/** Calls in flight at once (a reply naming another request id leaves its call to time out). */
const CONCURRENT = 16

export async function fuzzClient(o: ClientFuzzOptions): Promise<ClientFuzzSummary> {
  const t0 = performance.now()
  let unhandled = 0
  const onUnhandled = (): void => {
    unhandled++
  }
  process.on('unhandledRejection', onUnhandled)
  const evil: Host = await createHost({ listen: ['/ip4/127.0.0.1/tcp/0'], pubsub: false })
  const client: Host = await createHost({ listen: [], pubsub: false })
  const ctx: FrameContext = { rng: createRng(o.seed), strings: ['s', 'x', evil.peerId.toString()], dim: DIM }
  const outcomes: Record<string, number> = {}
  const count = (k: string): void => {
    outcomes[k] = (outcomes[k] ?? 0) + 1
  }
  let untyped = 0
  const classify = (err: unknown): string => {
    const code = (err as { code?: unknown }).code
    if (err instanceof ProtocolError || typeof code === 'string') return `rejected ${String(code)}`
    untyped++
    return `untyped ${(err as Error)?.name}`
  }
  try {
    // the hostile hop: every request gets one fuzz reply, usually carrying the request's id
    await evil.handle(
      SESSION_PROTOCOL,
      async (stream: Stream) => {
        const ch = createMessageChannel(stream)
        try {
          while (true) {
            const req = await ch.read()
            if (req === undefined) break
            const obj = generate(reflected.SessionResponse, ctx)
            if (ctx.rng() < 0.95) obj.requestId = peekVarintField(req, 1) ?? 1
            await ch.write(mutate(encode(reflected.SessionResponse, obj, ctx), ctx).bytes)
          }
          await ch.close()
        } catch {
          ch.abort(new Error('fuzz server done'))
        }
      },
      SESSION_STREAM_LIMITS
    )
    await evil.handle(INFO_PROTOCOL, async (stream: Stream) => {
      const ch = createMessageChannel(stream)
      try {
        await ch.read()
        await ch.write(mutate(encode(reflected.InfoResponse, generate(reflected.InfoResponse, ctx), ctx), ctx).bytes)
        await ch.close()
      } catch {
        ch.abort(new Error('fuzz server done'))
      }
    })

    const resultCap = tensorByteLength([MAX_LENGTH, DIM], 'f32') + STEP_SLACK_BYTES
    const hidden = encodeTensor(new Float32Array(DIM).fill(0.5), [1, DIM], 'f32')
    const dial = async (): Promise<SessionCaller> =>
      createSessionCaller(await client.dialProtocol(evil.getMultiaddrs(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS), {
        maxBodyBytes: (body) =>
          body === 'result' ? resultCap : body === 'snapshot' ? DEFAULT_MAX_MESSAGE_BYTES : MAX_CONTROL_BYTES
      })
    let next = 0
    let infoSent = 0
    let dialFailures = 0
    // CONCURRENT workers, each with its own stream: a reply that kills a stream costs only its worker a re-dial
    const worker = async (): Promise<void> => {
      let caller: SessionCaller | undefined
      while (next < o.replies && !o.signal?.aborted) {
        try {
          caller ??= await dial()
        } catch (err) {
          // the hostile peer reset the stream under negotiation, or its connection went: a fresh one
          dialFailures++
          if (dialFailures > o.replies) throw new Error(`client fuzz: cannot reach the hostile peer (${(err as Error).name})`)
          await client.hangUp(evil.peerId).catch(() => {})
          continue
        }
        const i = next++
        try {
          const res = await caller.call(
            { type: 'step', step: { sessionId: 's', stepId: i + 1, startPosition: 0, hidden, chain: false } },
            { signal: AbortSignal.timeout(1_000) }
          )
          count(`answered ${res.type}`)
        } catch (err) {
          // our own deadline: the reply named another request id, and the caller ignored it
          if ((err as Error)?.name === 'TimeoutError') count('ignored (reply for another request id)')
          else count(classify(err))
          caller.abort(err as Error) // whatever failed, the next reply goes to a fresh stream
          caller = undefined
        }
        if (i % 10 === 0) {
          infoSent++
          try {
            await fetchInfo(client, evil.getMultiaddrs(), { signal: AbortSignal.timeout(5_000) })
            count('info answered')
          } catch (err) {
            // our own deadline (a loaded machine, or a reply that never completes): the caller's
            // abort, as for session calls, not a reply the client failed to type
            if ((err as Error)?.name === 'TimeoutError') count('info timed out (our deadline)')
            else count(`info ${classify(err)}`)
          }
        }
        if (i > 0 && i % 5_000 === 0) {
          const s = (performance.now() - t0) / 1000
          o.log?.(`client fuzz: ${i}/${o.replies} replies, ${Math.round(i / s)}/s, ${Math.round(s)} s`)
        }
      }
      caller?.abort(new Error('fuzz: done'))
    }
    await Promise.all(Array.from({ length: CONCURRENT }, () => worker()))
    await new Promise((r) => setTimeout(r, 100)) // late rejections surface before the count
    return {
      target: 'client',
      seed: o.seed,
      sessionReplies: Math.min(next, o.replies),
      infoReplies: infoSent,
      stoppedEarly: next < o.replies,
      repliesPerSecond: Math.round(Math.min(next, o.replies) / ((performance.now() - t0) / 1000)),
      outcomes,
      untypedErrors: untyped,
      dialFailures,
      unhandledRejections: unhandled,
      seconds: Math.round((performance.now() - t0) / 100) / 10
    }
  } finally {
    process.off('unhandledRejection', onUnhandled)
    await Promise.all([evil.stop(), client.stop()])
  }
}
