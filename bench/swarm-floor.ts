/**
 * The transport floor for bench/swarm.ts: the round trip of one activation row over a plain
 * TCP socket between this process and a child process on 127.0.0.1 (TCP_NODELAY, no
 * encryption, no muxer, no codecs). A swarm hop's `linkMs` minus half of this is what the
 * libp2p stack (Noise, yamux, framing, protobuf) and the peers' wake-ups add per traversal.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { median, round } from './swarm-stats.js'

// the echo peer: answers every `bytes` it reads with as many bytes
const ECHO_SOURCE = `
const net = require('node:net')
const bytes = Number(process.argv[1])
const server = net.createServer((s) => {
  s.setNoDelay(true)
  const reply = Buffer.alloc(bytes)
  let got = 0
  s.on('data', (d) => { got += d.length; while (got >= bytes) { got -= bytes; s.write(reply) } })
})
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'))
`

/** Median round trip (ms) of `bytes` each way, back to back and after `idleMs` of sleep (a token's gap). */
export async function rawTcpRoundTrip(bytes: number, rounds = 200, idleMs = 20): Promise<{ hotMs: number; afterIdleMs: number }> {
  const child = spawn(process.execPath, ['-e', ECHO_SOURCE, String(bytes)], { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    const [line] = (await once(child.stdout!, 'data')) as [Buffer]
    const sock = connect(Number(String(line).trim()), '127.0.0.1')
    sock.setNoDelay(true)
    await once(sock, 'connect')
    const payload = Buffer.alloc(bytes, 1)
    let got = 0
    let done: (() => void) | undefined
    sock.on('data', (d: Buffer) => {
      got += d.length
      if (got >= bytes) {
        got -= bytes
        done?.()
      }
    })
    const roundTrip = async (): Promise<number> => {
      const t0 = performance.now()
      await new Promise<void>((resolve) => {
        done = resolve
        sock.write(payload)
      })
      return performance.now() - t0
    }
    const hot: number[] = []
    const idle: number[] = []
    for (let i = 0; i < rounds; i++) hot.push(await roundTrip())
    for (let i = 0; i < Math.ceil(rounds / 4); i++) {
      await new Promise((r) => setTimeout(r, idleMs))
      idle.push(await roundTrip())
    }
    sock.destroy()
    return { hotMs: round(median(hot)), afterIdleMs: round(median(idle)) }
  } finally {
    child.kill()
  }
}
