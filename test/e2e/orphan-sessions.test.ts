/**
 * Issue #39: sessions do not outlive their owner. A real node process (loopback) frees the
 * sessions of a peer whose last connection closed after --orphan-timeout, while another peer's
 * session, whose owner stays connected, stays. Before the fix both were kept until the
 * 5-minute idle timeout (the issue measured 16 sessions still held after both attackers left).
 */
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createSessionCaller,
  fetchInfo,
  type Host,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS
} from '../../protocol/index.js'
import { openBody } from '../helpers/hostile-cases.js'
import { GGUF_PATH } from '../helpers/reference.js'

describe('sessions of a disconnected owner (issue #39)', () => {
  let node: LocalNode
  let leaver: Host
  let stayer: Host
  const target = () => node.addrs.map((a) => multiaddr(a))

  beforeAll(async () => {
    // a first-step timeout far away, so only the owner leaving can free these sessions
    const args = ['--kernels', 'reference', '--first-step-timeout', '600000', '--orphan-timeout', '1000']
    node = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args })
    ;[leaver, stayer] = await Promise.all([1, 2].map(() => createHost({ listen: [], pubsub: false })))
  }, 60_000)

  afterAll(async () => {
    await Promise.all([leaver, stayer].map((h) => h?.stop()))
    await node?.stop()
  })

  it("frees a leaving owner's sessions soon, and keeps a connected owner's", async () => {
    for (const [host, n] of [
      [leaver, 3],
      [stayer, 1]
    ] as const) {
      const c = createSessionCaller(await host.dialProtocol(target(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
      for (let i = 0; i < n; i++) await c.call(openBody(`s-${i}`, { modelId: node.modelId, start: 1, end: 4, maxLength: 16 }))
    }
    const active = async () => (await fetchInfo(stayer, target())).info.activeSessions
    expect(await active()).toBe(4)
    await leaver.stop() // every connection of the leaver closes
    let now = 4
    for (let i = 0; i < 40 && now > 1; i++) {
      await new Promise((r) => setTimeout(r, 250))
      now = await active()
    }
    expect(now).toBe(1)
  }, 60_000)
})
