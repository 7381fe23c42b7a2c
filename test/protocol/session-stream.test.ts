import type { Stream } from '@libp2p/interface'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  BusyError,
  createHost,
  createMessageChannel,
  createSessionCaller,
  decodeSessionResponse,
  decodeTensor,
  encodeTensor,
  type Host,
  NextHopFailedError,
  type NoReply,
  RemoteError,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionRequest,
  type SessionResponseBody,
  serveSessionStream,
  UnknownSessionError
} from '../../protocol/index.js'
import { errorCode } from '../../shards/index.js'

/** A toy hop: sessions hold a position; steps add 1 to every activation. */
function toyHandler(peerId: string) {
  const sessions = new Map<string, number>()
  return async (req: SessionRequest): Promise<SessionResponseBody | NoReply> => {
    switch (req.type) {
      case 'open':
        if (req.open.sessionId === 'busy') throw new BusyError('no free sessions')
        sessions.set(req.open.sessionId, 0)
        return { type: 'opened', opened: { sessionId: req.open.sessionId } }
      case 'step': {
        const { sessionId, stepId, hidden } = req.step
        if (!sessions.has(sessionId)) throw new UnknownSessionError(`no session ${sessionId}`)
        const x = decodeTensor(hidden, { shape: [undefined, 64] })
        // one way: a negative input fails later (as a chain's later hop would), others never answer
        if (req.step.oneWay) {
          if (x[0] >= 0) return { type: 'noReply', failure: Promise.resolve() }
          return {
            type: 'noReply',
            failure: new Promise<void>((_, reject) =>
              setTimeout(() => reject(new BusyError(`step ${stepId} failed downstream`)), 30)
            )
          }
        }
        for (let i = 0; i < x.length; i++) x[i] += 1
        const out = encodeTensor(x, hidden.shape, hidden.dtype)
        return { type: 'result', result: { sessionId, stepId, hidden: out, timings: [{ peerId, computeMs: 0.01 }] } }
      }
      case 'rewind':
        return { type: 'rewound', rewound: req.rewind }
      case 'close':
        sessions.delete(req.close.sessionId)
        return { type: 'closed', closed: req.close }
      case 'await':
        throw new UnknownSessionError('the toy hop does not chain')
      default:
        throw new UnknownSessionError(`the toy hop does not handle ${req.type}`)
    }
  }
}

describe('session streams over real libp2p hosts', () => {
  let client: Host
  let hop: Host
  const failures: Error[] = []

  beforeEach(async () => {
    failures.length = 0
    ;[client, hop] = await Promise.all([createHost({ pubsub: false, listen: [] }), createHost({ pubsub: false })])
    const handler = toyHandler(hop.peerId.toString())
    await hop.handle(
      SESSION_PROTOCOL,
      (stream: Stream) =>
        serveSessionStream(stream, handler, { peerId: hop.peerId.toString(), onError: (err) => failures.push(err) }),
      SESSION_STREAM_LIMITS
    )
  })

  afterEach(async () => {
    await Promise.all([client?.stop(), hop?.stop()])
  })

  const open = async (sessionId: string) => {
    const stream = await client.dialProtocol(hop.getMultiaddrs(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS)
    const caller = createSessionCaller(stream)
    const opened = await caller.call({
      type: 'open',
      open: { sessionId, modelId: 'm', start: 0, end: 4, maxLength: 64, wireDtype: 'f32', nextHops: [] }
    })
    expect(opened).toMatchObject({ type: 'opened', opened: { sessionId } })
    return caller
  }

  const step = (sessionId: string, stepId: number, value: number) => ({
    type: 'step' as const,
    step: {
      sessionId,
      stepId,
      startPosition: stepId,
      hidden: encodeTensor(new Float32Array(64).fill(value), [1, 64], 'f32'),
      chain: false
    }
  })

  it('matches pipelined responses to requests and runs sessions side by side', async () => {
    const [s1, s2] = await Promise.all([open('s1'), open('s2')])
    const calls = []
    for (let i = 1; i <= 20; i++) calls.push(s1.call(step('s1', i, i)), s2.call(step('s2', i, -i)))
    const results = await Promise.all(calls)
    results.forEach((res, k) => {
      if (res.type !== 'result') throw new Error('expected a result')
      const i = Math.floor(k / 2) + 1
      expect(res.result.stepId).toBe(i)
      expect(decodeTensor(res.result.hidden!)[0]).toBe(k % 2 === 0 ? i + 1 : -i + 1)
    })
    expect(await s1.call({ type: 'close', close: { sessionId: 's1' } })).toMatchObject({ type: 'closed' })
    await s1.close()
    await s2.close()
  })

  it('one-way requests get no answer unless they fail, then a typed error after later answers', async () => {
    const s = await open('s')
    const oneWay = (sessionId: string, stepId: number, value: number) => ({
      type: 'step' as const,
      step: { ...step(sessionId, stepId, value).step, chain: true, oneWay: true }
    })
    const ok = await s.send(oneWay('s', 1, 1))
    // the next call's answer is its own, not something for the one-way step
    expect(await s.call(step('s', 2, 2))).toMatchObject({ type: 'result', result: { stepId: 2 } })
    const late = await s.send(oneWay('s', 3, -1))
    const lateError = late.failed.catch((e: unknown) => e)
    expect(await s.call(step('s', 4, 4))).toMatchObject({ type: 'result', result: { stepId: 4 } }) // answered before the failure
    const err = await lateError
    expect(err).toBeInstanceOf(RemoteError)
    expect(err).toMatchObject({ code: 'BUSY', peerId: hop.peerId.toString(), stepId: 3 })
    const unknown = await s.send(oneWay('nope', 5, 1))
    await expect(unknown.failed).rejects.toMatchObject({ code: 'UNKNOWN_SESSION', stepId: 5 })
    // settled: a late failure is dropped, nothing else breaks
    const settled = await s.send(oneWay('s', 6, -1))
    s.settle(settled.requestId)
    await new Promise((r) => setTimeout(r, 60))
    expect(await s.call(step('s', 7, 7))).toMatchObject({ type: 'result', result: { stepId: 7 } })
    expect(s.pending).toBe(0)
    s.settle(ok.requestId)
    // a dead stream fails the one-way requests still listened to
    const pendingOne = await s.send(oneWay('s', 8, 1))
    s.abort(new NextHopFailedError('gone'))
    await expect(pendingOne.failed).rejects.toBeInstanceOf(NextHopFailedError)
  })

  it('turns handler failures into typed RemoteErrors and keeps the stream usable', async () => {
    const s = await open('s')
    const err = await s.call(step('nope', 7, 0)).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(RemoteError)
    expect(err).toMatchObject({ code: 'UNKNOWN_SESSION', peerId: hop.peerId.toString(), stepId: 7 })
    const busy = await s
      .call({
        type: 'open',
        open: { sessionId: 'busy', modelId: 'm', start: 0, end: 1, maxLength: 1, wireDtype: 'f32', nextHops: [] }
      })
      .catch((e: unknown) => e)
    expect(busy).toMatchObject({ code: 'BUSY' })
    // a shape the session does not accept
    const bad = { ...step('s', 8, 0) }
    bad.step.hidden = encodeTensor(new Float32Array(32), [1, 32], 'f32')
    await expect(s.call(bad)).rejects.toMatchObject({ code: 'BAD_SHAPE', stepId: 8 })
    expect(await s.call(step('s', 9, 1))).toMatchObject({ type: 'result' })
    expect(failures.map((f) => errorCode(f))).toEqual(['UNKNOWN_SESSION', 'BUSY', 'BAD_SHAPE'])
  })

  it('answers garbage with a stream-level error and keeps serving other streams', async () => {
    const stream = await client.dialProtocol(hop.getMultiaddrs(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS)
    const channel = createMessageChannel(stream)
    await channel.write(Uint8Array.of(0x0a, 0xff, 0xff, 0xff))
    const reply = decodeSessionResponse((await channel.read())!)
    expect(reply).toMatchObject({ requestId: 0, type: 'error', error: { code: 'MALFORMED' } })
    expect(await channel.read()).toBeUndefined() // the hop closed its side

    // a caller whose stream dies fails pending calls with NextHopFailedError
    const s = await open('s3')
    expect(await s.call(step('s3', 1, 0))).toMatchObject({ type: 'result' })
    const pending = s.call(step('s3', 2, 0))
    s.channel.stream.abort(new Error('cut'))
    await expect(pending).rejects.toBeInstanceOf(NextHopFailedError)
    await expect(s.call(step('s3', 3, 0))).rejects.toBeInstanceOf(NextHopFailedError)
    const other = await open('s4')
    expect(await other.call(step('s4', 1, 0))).toMatchObject({ type: 'result' })
  })

  it('measures the loopback round trip of a 64 x f32 step', async () => {
    const s = await open('rtt')
    for (let i = 0; i < 50; i++) await s.call(step('rtt', i, 0.5)) // warm up
    const times: number[] = []
    for (let i = 50; i < 550; i++) {
      const t0 = performance.now()
      await s.call(step('rtt', i, 0.5))
      times.push(performance.now() - t0)
    }
    times.sort((x, y) => x - y)
    const q = (p: number) => times[Math.floor(p * (times.length - 1))].toFixed(3)
    console.log(`session step round trip, [1,64] f32, loopback: p50 ${q(0.5)} ms, p90 ${q(0.9)} ms, p99 ${q(0.99)} ms`)
    expect(times.length).toBe(500)
  })
})
