/**
 * Issue #18, load-aware routes: many clients that join a swarm with two replicas of a span at
 * the same moment spread over both (each client's route cost adds the replicas' announced
 * queues, its own measured step times and its own tie-break), and each gets the tokens of one
 * process. Separate node processes, libp2p over TCP on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { honestTokens } from '../helpers/honest-tokens.js'
import { GGUF_PATH } from '../helpers/reference.js'

const CLIENTS = 12
const PROMPT = 'Once upon a time'
const MAX_TOKENS = 12
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

describe('clients spread over two replicas of a span', () => {
  let a: LocalNode
  let b: LocalNode
  let expected: number[]

  beforeAll(async () => {
    a = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args: FAST })
    b = await startLocalNode({ model: GGUF_PATH, layers: '1:4', bootstrap: [a.addrs[0]], args: FAST })
    expected = await honestTokens(PROMPT, MAX_TOKENS)
  }, 60_000)

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()])
  })

  it('both replicas serve clients, and every client gets the tokens of one process', async () => {
    const run = async () => {
      const routes: string[] = []
      const client = await createClient({
        bootstrap: [a.addrs[0], b.addrs[0]],
        model: GGUF_PATH,
        kernels: createReferenceKernels(),
        canaries: false,
        log: (e) => {
          if (e.event === 'route') for (const h of e.route as Array<{ peerId: string }>) routes.push(h.peerId)
        }
      })
      try {
        await client.view.waitForRoute(1, 4, 30_000)
        const r = await client.generate(PROMPT, { maxTokens: MAX_TOKENS, temperature: 0, signal: AbortSignal.timeout(120_000) })
        return { tokens: r.tokens, routes }
      } finally {
        await client.close()
      }
    }
    const outcomes = await Promise.all(Array.from({ length: CLIENTS }, run))
    for (const o of outcomes) expect(o.tokens).toEqual(expected)
    const first = outcomes.map((o) => o.routes[0])
    const onA = first.filter((p) => p === a.peerId).length
    const onB = first.filter((p) => p === b.peerId).length
    console.log(JSON.stringify({ clients: CLIENTS, onA, onB }))
    expect(onA + onB).toBe(CLIENTS)
    expect(onA).toBeGreaterThan(0)
    expect(onB).toBeGreaterThan(0)
  }, 300_000)
})
