import net from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHost, createMessageChannel, type Host, type MessageChannel, SESSION_STREAM_LIMITS } from '../../protocol/index.js'

// Observes (does not replace) socket writes: how many TCP writes a message costs.
const writeSizes: number[] = []
const stockWrite = net.Socket.prototype.write
function observe(): void {
  net.Socket.prototype.write = function (this: net.Socket, data: Uint8Array, ...rest: unknown[]) {
    writeSizes.push(data.length)
    return (stockWrite as (...a: unknown[]) => boolean).call(this, data, ...rest)
  } as typeof stockWrite
}

describe('yamux window updates on session streams (protocol/host.ts)', () => {
  let a: Host
  let b: Host
  let channel: MessageChannel

  beforeAll(async () => {
    ;[a, b] = await Promise.all([createHost({ pubsub: false }), createHost({ pubsub: false, listen: [] })])
    await a.handle(
      '/layerswarm-test/echo/1.0.0',
      async (stream) => {
        const c = createMessageChannel(stream)
        for (let f = await c.read(); f !== undefined; f = await c.read()) await c.write(f)
      },
      SESSION_STREAM_LIMITS
    )
    channel = createMessageChannel(await b.dialProtocol(a.getMultiaddrs(), '/layerswarm-test/echo/1.0.0', SESSION_STREAM_LIMITS))
    observe()
  })

  afterAll(async () => {
    net.Socket.prototype.write = stockWrite
    await Promise.all([a?.stop(), b?.stop()])
  })

  it('a message costs one socket write each way, not one plus a window update', async () => {
    const frame = new Uint8Array(3088).fill(5)
    for (let i = 0; i < 5; i++) {
      await channel.write(frame)
      await channel.read()
    }
    writeSizes.length = 0
    for (let i = 0; i < 40; i++) {
      await channel.write(frame)
      expect(await channel.read()).toEqual(frame)
    }
    // 40 round trips, 80 data writes; a window update goes out only after half a window (128 KiB)
    expect(writeSizes.filter((n) => n > 100)).toHaveLength(80)
    expect(writeSizes.length).toBeLessThan(80 + 4)
  })

  it('frames far larger than the window still flow both ways', async () => {
    const big = new Uint8Array(3_000_000).map((_, i) => i % 251)
    await channel.write(big)
    const back = await channel.read()
    expect(back?.byteLength).toBe(big.byteLength)
    expect(Buffer.compare(Buffer.from(back!), Buffer.from(big))).toBe(0) // toEqual walks 3 M elements for seconds
  })
})
