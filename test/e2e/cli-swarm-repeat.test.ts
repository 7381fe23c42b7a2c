/**
 * Issue 21, item 1: after ~10 short-lived CLI clients from one IP, gossipsub's stock IP
 * colocation penalty hid the swarm from every new client (NO_ROUTE). Thirty separate
 * `generate` processes through one bootstrap address of a three-node swarm must all succeed
 * with the same tokens.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { cliAsync } from '../helpers/cli-async.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const RUNS = 30
const TOKENS = 6

describe('30 consecutive CLI runs through one bootstrap address', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:2' }))
    const bootstrap = [nodes[0].addrs[0]]
    nodes.push(
      ...(await Promise.all([
        startLocalNode({ model: GGUF_PATH, layers: '2:3', bootstrap }),
        startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap })
      ]))
    )
  }, 90_000)

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('every run finds the whole swarm and prints the same tokens', { timeout: 900_000 }, async () => {
    const args = [
      'generate',
      '--bootstrap',
      nodes[0].addrs[0],
      '--prompt',
      ref.prompt,
      '--max-tokens',
      String(TOKENS),
      '--temperature',
      '0',
      '--canary-rate',
      '0',
      '--threads',
      '1',
      '--json'
    ]
    const failures: string[] = []
    for (let i = 0; i < RUNS; i++) {
      const r = await cliAsync(args, 120_000)
      if (r.status !== 0) {
        failures.push(`run ${i + 1}: status ${r.status}: ${r.stderr.trim()}`)
        continue
      }
      const out = JSON.parse(r.stdout)
      expect(out.tokens, `run ${i + 1}`).toEqual(ref.generated_tokens.slice(0, TOKENS))
      expect(out.report.routes[0].map((h: { peerId: string }) => h.peerId)).toEqual(nodes.map((n) => n.peerId))
    }
    expect(failures).toEqual([])
  })
})
