import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const N_TOKENS = 24
// nodes that keep polling 40 ms after each request (node/daemon/busy-poll.ts)
const ARGS = ['--kernels', 'reference', '--announce-interval', '300', '--busy-poll', '40']

describe('3 node processes with --busy-poll', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:2', args: ARGS }))
    const bootstrap = [nodes[0].addrs[0]]
    nodes.push(
      ...(await Promise.all(['2:3', '3:4'].map((layers) => startLocalNode({ model: GGUF_PATH, layers, bootstrap, args: ARGS }))))
    )
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  for (const forwarding of ['relay', 'chain'] as const) {
    it(`${forwarding}: the greedy tokens of llama2.c, through polling peers`, async () => {
      const client = await createClient({
        bootstrap: nodes.map((n) => n.addrs[0]),
        model: GGUF_PATH,
        kernels: createReferenceKernels(),
        routeTimeoutMs: 20_000,
        forwarding
      })
      try {
        const result = await client.generate(ref.prompt, { maxTokens: N_TOKENS, temperature: 0 })
        expect(result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
        expect(result.report.routes[0].map((h) => [h.start, h.end])).toEqual([
          [1, 2],
          [2, 3],
          [3, 4]
        ])
        expect(result.report.failovers).toBe(0)
      } finally {
        await client.close()
      }
    })
  }

  it('each node polled, and all stop cleanly on SIGTERM', async () => {
    await Promise.all(nodes.map((n) => n.stop(10_000)))
    for (const n of nodes) {
      expect(n.process.exitCode).toBe(0)
      // stderr lines may still be in flight when the exit event fires
      const stoppingLine = async (): Promise<Record<string, unknown> | undefined> => {
        for (let i = 0; i < 100; i++) {
          const line = n.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.msg === 'stopping')
          if (line) return line
          await new Promise((r) => setTimeout(r, 20))
        }
        return undefined
      }
      expect((await stoppingLine())?.busyPolledMs).toBeGreaterThan(0)
    }
  })
})
