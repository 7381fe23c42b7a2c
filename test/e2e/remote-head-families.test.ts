import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels, parseShape, type RandomModelOptions, writeRandomModel } from '../../shards/index.js'
import { honestTokens } from '../helpers/honest-tokens.js'

// Issue #35: with the head on a peer, every family's greedy tokens equal one process's, relayed
// and chained. Per family, two node processes on 127.0.0.1 serve blocks [1,3) and [3,6) of a
// small random model; the peer of [3,6) runs the final norm (and Gemma 2's final soft-cap) and
// the head, and answers the sealed top-k.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-head-families-'))
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const PROMPT = 'once upon a time'
const N_TOKENS = 20

const FAMILIES: Array<[string, RandomModelOptions['arch']]> = [
  ['llama', { architecture: 'llama' }],
  ['qwen2', { architecture: 'qwen2' }],
  ['qwen3', { architecture: 'qwen3', headDim: 32 }],
  ['gemma2', { architecture: 'gemma2', headDim: 32, slidingWindow: 4, attnSoftcap: 5, finalSoftcap: 10 }],
  ['gemma3', { architecture: 'gemma3', headDim: 32, slidingWindow: 4, swaPattern: 3, ropeTheta: 1000000 }]
]

describe('the head on a peer, every family (node processes on 127.0.0.1)', () => {
  const nodes: LocalNode[] = []
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  for (const [name, arch] of FAMILIES) {
    it(`${name}: relayed and chained greedy tokens equal one process's`, { timeout: 120_000 }, async () => {
      const path = join(dir, `${name}.gguf`)
      writeRandomModel(path, parseShape('64,6,4,2,96,300'), { dtype: 'q8_0', seed: 41, seqLen: 128, arch })
      const local = await honestTokens(PROMPT, N_TOKENS, path)
      const a = await startLocalNode({ model: path, layers: '1:3', args: FAST })
      nodes.push(a)
      const b = await startLocalNode({ model: path, layers: '3:6', bootstrap: [a.addrs[0]], args: FAST })
      nodes.push(b)
      for (const forwarding of ['relay', 'chain'] as const) {
        const client = await createClient({
          bootstrap: [a.addrs[0]],
          model: path,
          kernels: createReferenceKernels(),
          head: 'remote',
          forwarding,
          canaries: false,
          routeTimeoutMs: 20_000
        })
        try {
          const r = await client.generate(PROMPT, { maxTokens: N_TOKENS, temperature: 0 })
          expect(r.tokens, `${name} ${forwarding}`).toEqual(local)
          expect(r.head?.steps).toBeGreaterThan(0)
          expect(r.head?.violations).toBe(0)
        } finally {
          await client.close()
        }
      }
      await Promise.all([a.stop(), b.stop()])
    })
  }
})
