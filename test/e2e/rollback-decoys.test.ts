import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { readNodeHoldings } from '../../node/cli/metrics-scrape.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

/*
 * Issue 16 (follow-up of test/e2e/rollback.test.ts): with 4 decoys in flight, earlier clients'
 * decoy sessions filled a tamperer's 16-session cap, so later clients met BUSY. Root cause: a
 * convicted peer is routed around, so afterStep never reaches its decoys again (neither a next
 * step nor retireLanes), and their sessions stayed open on it until the client closed, through the
 * rollback's recomputation and the result's verification. They now end at the conviction
 * (DecoyPool.releasePeer), and so does the convicted peer's real hop session (RemotePipeline.fail
 * sends it a close, where it used to abort the stream and leave the session to the node's idle
 * timeout). Checked on the tamperer's own metrics, before the client closes.
 */
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

describe('a convicted peer keeps no session of the client open', () => {
  const nodes: Record<string, LocalNode> = {}
  beforeAll(async () => {
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--metrics', '127.0.0.1:0', '--tamper', 'noise', '--tamper-size', '0.5', '--tamper-rate', '1']
    })
    const first = [nodes.tamperer.addrs[0]]
    nodes.honestA = await startLocalNode({ model: GGUF_PATH, layers: '1:3', bootstrap: first, args: FAST })
    nodes.honestB = await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap: first, args: FAST })
  }, 120_000)
  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('with 4 decoys in flight, the tamperer holds no session of a client that convicted it', {
    timeout: 300_000
  }, async () => {
    let convicted = 0
    for (let c = 0; c < 3; c++) {
      // earlier clients closed every session they had on it, so it starts from none
      expect((await readNodeHoldings(nodes.tamperer)).sessions).toBe(0)
      const events: Array<Record<string, unknown>> = []
      const client = await createClient({
        bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
        model: GGUF_PATH,
        kernels: createReferenceKernels(),
        canaries: { adaptive: { inFlight: 4 } },
        log: (e) => events.push(e)
      })
      try {
        await client.view.waitForRoute(1, 4, 20_000)
        await client.generate('Once upon a time', { maxTokens: 48, temperature: 0 })
        if (!events.some((e) => e.event === 'excluded' && e.peerId === nodes.tamperer.peerId)) continue // routed around it
        convicted++
        // the client is still open: its decoy sessions and its real hop's session on the tamperer
        // are closed (the decoys by DecoyPool.releasePeer, the hop by RemotePipeline.fail)
        let held = await readNodeHoldings(nodes.tamperer)
        for (let i = 0; i < 50 && held.sessions > 0; i++) {
          await new Promise((r) => setTimeout(r, 100))
          held = await readNodeHoldings(nodes.tamperer)
        }
        expect(held.sessions).toBe(0)
        const hopClose = events.find((e) => e.peerId === nodes.tamperer.peerId && e.blamed === true)
        expect(hopClose?.event).toBe('hopClosed')
      } finally {
        await client.close()
      }
    }
    expect(convicted).toBeGreaterThan(0)
  })
})
