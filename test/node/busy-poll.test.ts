import { connect, createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { createBusyPoller } from '../../node/daemon/busy-poll.js'

describe('busy poller (node --busy-poll)', () => {
  it('off (0 ms): never polls', () => {
    const p = createBusyPoller(0)
    p.touch()
    expect(p.active).toBe(false)
    expect(p.polledMs).toBe(0)
  })

  it('while polling, socket data and timers are still handled; the window ends by itself', async () => {
    const p = createBusyPoller(30)
    const server = createServer((s) => s.on('data', (d) => s.write(d)))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const port = (server.address() as { port: number }).port
    const sock = connect(port, '127.0.0.1')
    await new Promise((r) => sock.once('connect', r))
    try {
      p.touch()
      expect(p.active).toBe(true)
      // an echo round trip and a timer complete while the loop spins
      const echoed = new Promise<string>((r) => sock.once('data', (d) => r(String(d))))
      sock.write('ping')
      expect(await echoed).toBe('ping')
      await new Promise((r) => setTimeout(r, 1))
      // the window runs out without another touch
      while (p.active) await new Promise((r) => setTimeout(r, 5))
      expect(p.polledMs).toBeGreaterThan(0)
    } finally {
      sock.destroy()
      server.close()
    }
  })

  it('stop() ends polling at once and later touches do nothing', async () => {
    const p = createBusyPoller(60_000)
    p.touch()
    expect(p.active).toBe(true)
    p.stop()
    await new Promise((r) => setImmediate(r))
    await new Promise((r) => setImmediate(r))
    expect(p.active).toBe(false)
    p.touch()
    expect(p.active).toBe(false)
  })
})
