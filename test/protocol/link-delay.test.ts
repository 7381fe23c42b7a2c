import { once } from 'node:events'
import { connect, createServer, type Socket } from 'node:net'
import type { MultiaddrConnection } from '@libp2p/interface'
import { describe, expect, it } from 'vitest'
import { checkLinkDelay, delayWrites, InvalidLinkDelayError, linkDelayFromEnv } from '../../protocol/index.js'

/** The part of @libp2p/tcp's connection delayWrites wraps, over a real socket. */
function tcpConnection(socket: Socket) {
  return {
    socket,
    sendData(data: { byteLength: number; subarray(): Uint8Array }) {
      return { sentBytes: data.byteLength, canSendMore: socket.write(data.subarray()) }
    },
    async sendClose() {
      socket.end()
    }
  }
}

const chunk = (bytes: Uint8Array) => ({
  byteLength: bytes.byteLength,
  subarray: () => bytes,
  [Symbol.iterator]: [][Symbol.iterator]
})

describe('link delay (WAN injection for benchmarks)', () => {
  it('delays every byte by the one-way delay, paces at the bandwidth, keeps order and flushes before close', async () => {
    const server = createServer()
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const port = (server.address() as { port: number }).port
    const accepted = once(server, 'connection')
    const client = connect(port, '127.0.0.1')
    await once(client, 'connect')
    const [peer] = (await accepted) as [Socket]
    const received: Array<{ atMs: number; bytes: Buffer }> = []
    peer.on('data', (b: Buffer) => received.push({ atMs: performance.now(), bytes: b }))
    const ended = once(peer, 'end')

    const conn = tcpConnection(client)
    // 40 ms one way, 8 Mbit/s: 10 kB take 10 ms on the wire
    delayWrites(conn as unknown as MultiaddrConnection, { oneWayMs: 40, megabitsPerSecond: 8 })
    const t0 = performance.now()
    const payload = new Uint8Array(10_000).map((_, i) => i % 251)
    conn.sendData(chunk(payload.subarray(0, 5_000)) as never)
    conn.sendData(chunk(payload.subarray(5_000)) as never)
    await conn.sendClose()
    await ended
    const got = Buffer.concat(received.map((r) => r.bytes))
    expect(new Uint8Array(got)).toEqual(payload)
    // nothing arrives before the delay, the last byte not before delay + serialisation
    expect(received[0].atMs - t0).toBeGreaterThanOrEqual(40 + 5 - 1)
    expect(received.at(-1)!.atMs - t0).toBeGreaterThanOrEqual(40 + 10 - 1)
    client.destroy()
    server.close()
  })

  it('reads the environment and rejects bad values with a typed error', () => {
    expect(linkDelayFromEnv({})).toBeUndefined()
    expect(linkDelayFromEnv({ LAYERSWARM_LINK_DELAY_MS: '12.5' })).toEqual({ oneWayMs: 12.5, megabitsPerSecond: 0 })
    expect(checkLinkDelay({ oneWayMs: 0 })).toBeUndefined()
    expect(() => linkDelayFromEnv({ LAYERSWARM_LINK_DELAY_MS: 'soon' })).toThrow(InvalidLinkDelayError)
    expect(() => checkLinkDelay({ oneWayMs: 1, megabitsPerSecond: -1 })).toThrow(InvalidLinkDelayError)
  })
})
