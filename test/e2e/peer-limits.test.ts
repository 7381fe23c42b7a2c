/**
 * Issue #17, findings 3 and 4 against a real node process: a stream dripping a frame is reset
 * after the frame deadline, one peer's request flood meets its token bucket (BUSY) while another
 * peer is served, and no peer holds every session slot.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createSessionCaller,
  FRAME_DEADLINE_MS,
  type Host,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionResponse
} from '../../protocol/index.js'
import { openBody } from '../helpers/hostile-cases.js'
import { openRawSession, varint } from '../helpers/raw-session.js'
import { GGUF_PATH } from '../helpers/reference.js'

describe('per-peer limits and frame deadlines on a real node', () => {
  let node: LocalNode
  let flooder: Host
  let honest: Host
  const target = () => node.addrs.map((a) => multiaddr(a))

  beforeAll(async () => {
    node = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args: ['--kernels', 'reference'] })
    ;[flooder, honest] = await Promise.all([1, 2].map(() => createHost({ listen: [], pubsub: false })))
  }, 60_000)

  afterAll(async () => {
    await Promise.all([flooder, honest].map((h) => h?.stop()))
    await node?.stop()
  })

  it('resets a stream whose frame stops arriving, and serves others meanwhile', async () => {
    const slow = await openRawSession(flooder, target())
    const t0 = Date.now()
    slow.sendRaw(Uint8Array.of(...varint(2000), 0x08, 0x01)) // 2000 bytes announced, 2 sent
    const c = createSessionCaller(await honest.dialProtocol(target(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
    const err = await c.call({ type: 'close', close: { sessionId: 'none' } }).catch((e: { code?: string }) => e.code)
    expect(err).toBe('UNKNOWN_SESSION')
    const outcome = await slow.recv().then(
      (r) => r?.type ?? 'ended',
      () => 'reset'
    )
    expect(['reset', 'ended', 'error']).toContain(outcome)
    expect(Date.now() - t0).toBeGreaterThanOrEqual(FRAME_DEADLINE_MS - 500)
    c.abort(new Error('done'))
  }, 60_000)

  it("meets a peer's request flood with BUSY from its token bucket; another peer is served", async () => {
    const raw = await openRawSession(flooder, target())
    const n = 16_000 // the burst is 2,000 requests, the refill 1,000 a second
    const replies: Array<SessionResponse | undefined> = []
    const reading = (async () => {
      for (let i = 0; i < n; i++) replies.push(await raw.recv())
    })()
    for (let i = 1; i <= n; i++) void raw.send({ requestId: i, close: { sessionId: 'none' } })
    const c = createSessionCaller(await honest.dialProtocol(target(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
    const other = await c.call({ type: 'close', close: { sessionId: 'x' } }).catch((e: { code?: string }) => e.code)
    expect(other).toBe('UNKNOWN_SESSION')
    await reading
    const codes = replies.map((r) => (r?.type === 'error' ? r.error.code : r?.type))
    const busy = codes.filter((c) => c === 'BUSY').length
    console.log(`flood of ${n} requests: ${busy} BUSY, ${codes.filter((c) => c === 'UNKNOWN_SESSION').length} served`)
    expect(busy).toBeGreaterThan(0)
    expect(codes.filter((c) => c === 'UNKNOWN_SESSION').length).toBeGreaterThanOrEqual(2_000)
    expect(replies.every((r, i) => r?.requestId === i + 1)).toBe(true) // every request answered, in order
    c.abort(new Error('done'))
    raw.stream.abort(new Error('done'))
    expect(node.process.exitCode).toBeNull()
  }, 120_000)

  it('lets no one peer take every session slot', async () => {
    // the flooder's bucket refills at 1,000 requests/s: wait for it
    await new Promise((r) => setTimeout(r, 2_500))
    const c = createSessionCaller(await flooder.dialProtocol(target(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
    const open = (id: string) => c.call(openBody(id, { modelId: node.modelId, start: 1, end: 4, maxLength: 16 }))
    for (let i = 0; i < 12; i++) await open(`f-${i}`)
    const refused = await open('f-12').catch((e: { code?: string; message?: string }) => e)
    expect(refused).toMatchObject({ code: 'BUSY' })
    const h = createSessionCaller(await honest.dialProtocol(target(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
    expect(await h.call(openBody('mine', { modelId: node.modelId, start: 1, end: 4, maxLength: 16 }))).toMatchObject({
      type: 'opened'
    })
    c.abort(new Error('done'))
    h.abort(new Error('done'))
  }, 60_000)
})
