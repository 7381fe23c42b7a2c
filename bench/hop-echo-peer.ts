/**
 * The child process of bench/hop.ts: a libp2p host (protocol/host.ts: TCP + Noise + yamux)
 * that echoes frames on two protocols, so the bench can time the layers under a session step
 * one by one. Prints its multiaddr on stdout; runs until killed.
 *
 * - ECHO_PROTOCOL: every length-prefixed frame back as it came (libp2p + framing only)
 * - SESSION_ECHO_PROTOCOL: serveSessionStream answering each step with a result carrying the
 *   step's own tensor (plus protobuf session codec, tensor validation, request matching)
 */
import { createHost, createMessageChannel, SESSION_STREAM_LIMITS, serveSessionStream } from '../protocol/index.js'
import { ECHO_PROTOCOL, SESSION_ECHO_PROTOCOL } from './hop-protocols.js'

// LAYERSWARM_HOP_THRASH_MB: after answering, stream that many MB through the caches (as a hop's
// kernels do between two of its steps), so the next message finds this process's caches cold.
const thrashBytes = Number(process.env.LAYERSWARM_HOP_THRASH_MB ?? 0) * 2 ** 20
const thrashBuffer = thrashBytes > 0 ? Buffer.alloc(thrashBytes) : undefined
const thrash = (): void => {
  if (thrashBuffer) setImmediate(() => thrashBuffer.indexOf(255))
}

const host = await createHost({ pubsub: false })
await host.handle(
  ECHO_PROTOCOL,
  async (stream) => {
    const channel = createMessageChannel(stream)
    for (let frame = await channel.read(); frame !== undefined; frame = await channel.read()) {
      await channel.write(frame)
      thrash()
    }
    await channel.close()
  },
  SESSION_STREAM_LIMITS
)
await host.handle(
  SESSION_ECHO_PROTOCOL,
  (stream) =>
    serveSessionStream(stream, async (req) => {
      if (req.type !== 'step') throw new Error('steps only')
      const s = req.step
      thrash()
      return { type: 'result', result: { sessionId: s.sessionId, stepId: s.stepId, hidden: s.hidden, timings: [], receipts: [] } }
    }),
  SESSION_STREAM_LIMITS
)
process.stdout.write(`${host.getMultiaddrs()[0].toString()}\n`)
