/**
 * Issue #17, finding 4: a frame's read deadline and the node-wide budget of bytes in flight,
 * over real libp2p hosts (TCP + Noise + yamux on 127.0.0.1).
 */
import type { Stream } from '@libp2p/interface'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  type ByteBudget,
  createByteBudget,
  createHost,
  createMessageChannel,
  frameDeadlineMs,
  type Host
} from '../../protocol/index.js'
import { errorCode } from '../../shards/index.js'
import { varint } from '../helpers/raw-session.js'

const ECHO = '/layerswarm-test/limits/1.0.0'
const KiB = 1024
const text = (b: Uint8Array | undefined): string => new TextDecoder().decode(b)

describe('frame deadline and bytes-in-flight budget', () => {
  let a: Host
  let b: Host
  let budget: ByteBudget
  const refusals: string[] = []

  beforeEach(async () => {
    refusals.length = 0
    budget = createByteBudget(1024 * KiB)
    ;[a, b] = await Promise.all([createHost({ pubsub: false }), createHost({ pubsub: false })])
    await b.handle(ECHO, async (stream: Stream) => {
      const channel = createMessageChannel(stream, { maxMessageBytes: 1024 * KiB, budget, frameDeadlineMs: 500 })
      try {
        while (true) {
          const frame = await channel.read()
          if (frame === undefined) break
          await channel.write(new TextEncoder().encode(`${frame.byteLength >> 10} KiB`))
        }
        await channel.close()
      } catch (err) {
        refusals.push(errorCode(err) ?? (err as Error).name)
        await channel.write(new TextEncoder().encode(errorCode(err) ?? 'error')).catch(() => {})
        await channel.close().catch(() => {})
      }
    })
  })

  afterEach(async () => {
    await Promise.all([a?.stop(), b?.stop()])
  })

  const open = async () => createMessageChannel(await a.dialProtocol(b.getMultiaddrs(), ECHO), { maxMessageBytes: 1024 * KiB })

  it('gives a frame its deadline from its first byte: a stream dripping a frame is reset, others go on', async () => {
    expect(frameDeadlineMs(0)).toBeGreaterThan(0)
    expect(frameDeadlineMs(64 * 1024 * 1024)).toBeGreaterThan(frameDeadlineMs(0))
    const slow = await open()
    slow.stream.send(Uint8Array.of(...varint(1000), 1, 2, 3)) // announces 1000 bytes, sends 3
    const honest = await open()
    await honest.write(new Uint8Array(2 * KiB))
    expect(text(await honest.read())).toBe('2 KiB')
    const outcome = await slow.read({ signal: AbortSignal.timeout(10_000) }).then(
      (r) => r ?? 'ended',
      (e: Error) => e.name
    )
    expect(outcome).not.toBeInstanceOf(Uint8Array)
    expect(refusals).toContain('TIMEOUT')
    // the slow stream's reservation went back: a frame of almost the whole budget fits
    expect(budget.inFlight).toBe(0)
    await honest.write(new Uint8Array(1000 * KiB))
    expect(text(await honest.read())).toBe('1000 KiB')
  }, 30_000)

  it('refuses a frame that does not fit the budget and resets only its stream', async () => {
    const holder = await open()
    holder.stream.send(Uint8Array.of(...varint(800 * KiB), 1, 2, 3)) // reserves 800 KiB, still arriving
    await new Promise((r) => setTimeout(r, 100))
    expect(budget.inFlight).toBe(800 * KiB)
    const over = await open()
    await over.write(new Uint8Array(400 * KiB))
    expect(new TextDecoder().decode(await over.read())).toBe('BUSY')
    const under = await open()
    await under.write(new Uint8Array(100 * KiB))
    expect(text(await under.read())).toBe('100 KiB')
    holder.stream.send(new Uint8Array(800 * KiB - 3))
    expect(text(await holder.read())).toBe('800 KiB')
    expect(refusals).toEqual(['BUSY'])
  }, 30_000)
})
