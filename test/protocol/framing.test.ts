import type { Stream } from '@libp2p/interface'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  createHost,
  createMessageChannel,
  decodeInfoRequest,
  decodeInfoResponse,
  encodeInfoRequest,
  encodeInfoResponse,
  type Host,
  INFO_PROTOCOL,
  type InfoResponse,
  MalformedMessageError,
  MessageTooLargeError,
  request,
  serveRequest
} from '../../protocol/index.js'

const ECHO = '/layerswarm-test/echo/1.0.0'
const MiB = 1024 * 1024

function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n)
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed) & 0xff
  return out
}

function same(x: Uint8Array, y: Uint8Array): boolean {
  return x.constructor === Uint8Array && Buffer.compare(x, y) === 0
}

describe('framing over real libp2p hosts (TCP + Noise + yamux on 127.0.0.1)', () => {
  let a: Host
  let b: Host
  const serverErrors: Error[] = []

  beforeEach(async () => {
    serverErrors.length = 0
    ;[a, b] = await Promise.all([createHost({ pubsub: false }), createHost({ pubsub: false })])
    // echo server with a 16 MiB cap: returns each frame as it came, reports refusals
    await b.handle(ECHO, async (stream: Stream) => {
      const channel = createMessageChannel(stream, { maxMessageBytes: 16 * MiB })
      try {
        while (true) {
          const frame = await channel.read()
          if (frame === undefined) break
          await channel.write(frame)
        }
      } catch (err) {
        serverErrors.push(err as Error)
        await channel.write(new TextEncoder().encode(`refused: ${(err as Error).name}`))
      }
      await channel.close()
    })
  })

  afterEach(async () => {
    await Promise.all([a?.stop(), b?.stop()])
  })

  it('carries many pipelined messages both ways, in order', async () => {
    const stream = await a.dialProtocol(b.getMultiaddrs(), ECHO)
    const channel = createMessageChannel(stream)
    const sizes = Array.from({ length: 300 }, (_, i) => (i % 10 === 0 ? 0 : (i * 7919) % 70_000))
    const writes = Promise.all(sizes.map((n, i) => channel.write(pattern(n, i))))
    for (let i = 0; i < sizes.length; i++) {
      const frame = await channel.read()
      expect(frame?.byteLength).toBe(sizes[i])
      expect(same(frame!, pattern(sizes[i], i))).toBe(true) // toEqual on big arrays is very slow
    }
    await writes
    await channel.close()
    expect(await channel.read()).toBeUndefined() // clean end of stream
    expect(serverErrors).toEqual([])
  })

  it('passes a 10 MiB message under a 16 MiB cap', async () => {
    const stream = await a.dialProtocol(b.getMultiaddrs(), ECHO)
    const channel = createMessageChannel(stream, { maxMessageBytes: 16 * MiB })
    const big = pattern(10 * MiB, 3)
    await channel.write(big)
    const back = await channel.read()
    expect(back?.byteLength).toBe(big.byteLength)
    expect(same(back!, big)).toBe(true)
    await channel.close()
  })

  it('refuses an oversized frame with MessageTooLargeError and keeps serving', async () => {
    // the sender's own cap refuses locally, before anything is sent
    const small = createMessageChannel(await a.dialProtocol(b.getMultiaddrs(), ECHO), { maxMessageBytes: MiB })
    await expect(small.write(new Uint8Array(MiB + 1))).rejects.toThrow(MessageTooLargeError)
    small.abort(new Error('done'))

    // a sender with a larger cap gets its 20 MiB frame refused by the receiver
    const stream = await a.dialProtocol(b.getMultiaddrs(), ECHO)
    const channel = createMessageChannel(stream, { maxMessageBytes: 64 * MiB })
    await channel.write(new Uint8Array(20 * MiB))
    const reply = await channel.read()
    expect(new TextDecoder().decode(reply)).toBe('refused: MessageTooLargeError')
    const refusal = serverErrors.find((e) => e instanceof MessageTooLargeError)
    expect(refusal?.code).toBe('TOO_LARGE')

    // the listener still serves a second stream on the same connection
    const again = createMessageChannel(await a.dialProtocol(b.getMultiaddrs(), ECHO))
    await again.write(pattern(1000, 9))
    expect(await again.read()).toEqual(pattern(1000, 9))
    await again.close()
  })

  it('refuses truncated frames, oversized length prefixes before the body, endless prefixes', async () => {
    const truncated = await a.dialProtocol(b.getMultiaddrs(), ECHO)
    truncated.send(Uint8Array.of(100, 1, 2, 3)) // announces 100 bytes, sends 3
    await truncated.close()
    const reply = createMessageChannel(truncated)
    expect(new TextDecoder().decode(await reply.read())).toBe('refused: MalformedMessageError')
    expect(serverErrors[0]).toBeInstanceOf(MalformedMessageError)

    // the cap is checked on the length prefix: refused before any of the body exists
    const early = await a.dialProtocol(b.getMultiaddrs(), ECHO)
    early.send(Uint8Array.of(0x80, 0x80, 0x80, 0x0a)) // varint 20 MiB, no body follows
    const reply3 = createMessageChannel(early)
    expect(new TextDecoder().decode(await reply3.read())).toBe('refused: MessageTooLargeError')

    const endless = await a.dialProtocol(b.getMultiaddrs(), ECHO)
    endless.send(new Uint8Array(64).fill(0x80))
    const reply2 = createMessageChannel(endless)
    expect(new TextDecoder().decode(await reply2.read())).toBe('refused: MessageTooLargeError')
  })

  it('request() does one info-style exchange', async () => {
    const info: InfoResponse = {
      modelId: 'model-1',
      version: '1.0.0',
      nLayers: 8,
      dim: 64,
      start: 2,
      end: 6,
      throughput: 42,
      freeCacheTokens: 1000,
      maxSessions: 4,
      activeSessions: 0,
      wireDtypes: ['f32', 'f16'],
      x25519PublicKey: new Uint8Array(0)
    }
    await b.handle(INFO_PROTOCOL, (stream) =>
      serveRequest(stream, (bytes) => {
        decodeInfoRequest(bytes)
        return encodeInfoResponse(info)
      })
    )
    const signal = AbortSignal.timeout(5000)
    const bytes = await request(a, b.getMultiaddrs(), INFO_PROTOCOL, encodeInfoRequest(), { signal })
    expect(decodeInfoResponse(bytes)).toEqual(info)
    // by peer id too, once the address is known
    const again = await request(a, b.peerId, INFO_PROTOCOL, encodeInfoRequest(), { signal })
    expect(decodeInfoResponse(again).modelId).toBe('model-1')
  })
})
