/**
 * Issue #17, the fuzzed node's slow memory growth: what a session server keeps after a stream
 * ends must go back to what it held before, however the stream ended. Two leaks found by the
 * fuzzer's heap snapshots and record counts: every frame read added an entry to the node's
 * long-lived stop signal (AbortSignal.any, Node 20), and a stream refused at stream level kept
 * its frame's reservation in the node-wide budget of bytes in flight. Real libp2p hosts (TCP,
 * Noise, yamux on 127.0.0.1), the real session server; counts, not timings or RSS.
 */
import { setMaxListeners } from 'node:events'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { abortLinks } from '../../node/daemon/abort-links.js'
import {
  type ByteBudget,
  createByteBudget,
  createHost,
  type Host,
  linkSignals,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  serveSessionStream
} from '../../protocol/index.js'
import { openRawSession } from '../helpers/raw-session.js'

/** Streams opened, each with a few frames: enough that one entry per frame could not hide. */
const STREAMS = 40

describe('records a session server holds after its streams end', () => {
  let client: Host
  let server: Host
  let budget: ByteBudget
  let stop: AbortController

  beforeEach(async () => {
    budget = createByteBudget(64 * 1024 * 1024)
    stop = new AbortController()
    setMaxListeners(Infinity, stop.signal) // a listener per pending read, as on a node (node/daemon/server.ts)
    ;[client, server] = await Promise.all([createHost({ pubsub: false }), createHost({ pubsub: false })])
    await server.handle(
      SESSION_PROTOCOL,
      (stream) =>
        serveSessionStream(stream, async () => ({ type: 'closed', closed: { sessionId: 'x' } }), {
          signal: stop.signal,
          budget,
          // a refused frame's stream is reset soon after, so the test does not wait 10 s per stream
          frameDeadlineMs: 2_000
        }),
      SESSION_STREAM_LIMITS
    )
  })

  afterEach(async () => {
    stop.abort()
    await Promise.all([client?.stop(), server?.stop()])
  })

  it('gives back every stop-signal link and every reserved byte, for answered and refused frames alike', async () => {
    const linksBefore = abortLinks(stop.signal)
    // one after another: libp2p resets a connection whose peer opens many streams before it is set up
    const sessions = []
    for (let i = 0; i < STREAMS; i++) sessions.push(await openRawSession(client, server.getMultiaddrs()))
    await Promise.all(
      sessions.map(async (s, i) => {
        // answered frames: a request the handler replies to
        for (let k = 1; k <= 3; k++) expect((await s.request({ requestId: k, close: { sessionId: 'x' } }))?.requestId).toBe(k)
        if (i % 2 === 0) {
          // a frame refused at stream level (unparseable: request id 0), then the peer closes
          await s.sendFrame(Uint8Array.of(0xff, 0xff, 0xff))
          expect((await s.recv())?.requestId).toBe(0)
        }
        // (the server may have reset a refused stream already)
        await s.close().catch(() => {})
        while ((await s.recv().catch(() => undefined)) !== undefined) {}
      })
    )
    // the server ends its side of each stream as the clients close theirs: wait for that, not a time
    for (let i = 0; i < 200 && server.getConnections().some((c) => c.streams.length > 0); i++)
      await new Promise((r) => setTimeout(r, 50))
    expect(server.getConnections().flatMap((c) => c.streams)).toHaveLength(0)
    expect(budget.inFlight).toBe(0)
    expect(abortLinks(stop.signal)).toBe(linksBefore)
  }, 60_000)

  it('linkSignals follows its sources until cleared, and leaves nothing on them', () => {
    const long = new AbortController()
    for (let i = 0; i < 1000; i++) linkSignals([long.signal, AbortSignal.timeout(60_000)]).clear()
    expect(abortLinks(long.signal)).toBe(0)
    // an abort still reaches the linked signal, with its reason, also when it came first
    const reason = new Error('stopped')
    const link = linkSignals([undefined, long.signal])
    long.abort(reason)
    expect(link.signal.aborted).toBe(true)
    expect(link.signal.reason).toBe(reason)
    const late = linkSignals([long.signal])
    expect(late.signal.reason).toBe(reason)
  })
})
