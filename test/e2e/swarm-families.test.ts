import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile,
  parseShape,
  writeRandomModel
} from '../../shards/index.js'
import { runCli } from '../helpers/cli.js'

// A qwen3-shaped model (Q/K norms, head size 32 over dim 64, NEOX RoPE) served by 3 node
// processes on 127.0.0.1: the client's greedy tokens equal one process's, relayed and chained,
// and with canaries on, no honest peer is convicted. Plus `layerswarm generate` on qwen2/qwen3.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-families-'))
const QWEN3 = join(dir, 'qwen3.gguf')
const QWEN2 = join(dir, 'qwen2.gguf')
const N_TOKENS = 24
const PROMPT = 'once upon a time'
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

async function localRun(path: string): Promise<{ tokens: number[]; logits: Float32Array[] }> {
  const model = openModelFile(path)
  const edge = createEdge({ model })
  const shard = createShard({ model, start: 0, end: model.config.nLayers })
  const tokenizer = createTokenizer(model.vocabulary!)
  const tokens: number[] = []
  const logits: Float32Array[] = []
  for await (const t of generateTokens({
    temperature: 0,
    edge,
    pipeline: createLocalPipeline([shard], 'local', 128),
    promptTokens: tokenizer.encode(PROMPT),
    maxTokens: N_TOKENS,
    stopIds: tokenizer.stopIds,
    onLogits: (l) => logits.push(Float32Array.from(l))
  })) {
    tokens.push(t)
  }
  model.close()
  return { tokens, logits }
}

const same = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer).equals(Buffer.from(b.buffer))

describe('qwen-family models end to end', () => {
  const nodes: LocalNode[] = []
  let bootstrap: string[]

  beforeAll(async () => {
    const shape = parseShape('64,5,4,2,96,300')
    writeRandomModel(QWEN3, shape, { dtype: 'q8_0', seed: 21, seqLen: 128, arch: { architecture: 'qwen3', headDim: 32 } })
    writeRandomModel(QWEN2, shape, { dtype: 'f16', seed: 22, seqLen: 128, arch: { architecture: 'qwen2' } })
    nodes.push(await startLocalNode({ model: QWEN3, layers: '0:2', args: FAST }))
    bootstrap = [nodes[0].addrs[0]]
    nodes.push(
      ...(await Promise.all(['2:4', '3:5'].map((layers) => startLocalNode({ model: QWEN3, layers, bootstrap, args: FAST }))))
    )
  }, 120_000)

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  for (const forwarding of ['relay', 'chain'] as const) {
    it(`qwen3, 3 node processes, ${forwarding}: the greedy tokens of one process`, { timeout: 120_000 }, async () => {
      const local = await localRun(QWEN3)
      const client = await createClient({
        bootstrap,
        model: QWEN3,
        kernels: createReferenceKernels(),
        routeTimeoutMs: 20_000,
        edgeFirst: 1,
        edgeLast: 0,
        forwarding
      })
      try {
        const logits: Float32Array[] = []
        const result = await client.generate(PROMPT, {
          maxTokens: N_TOKENS,
          temperature: 0,
          onLogits: (l) => logits.push(Float32Array.from(l))
        })
        // Random weights may repeat a token: the logits of every step must match bit for bit too.
        expect(result.tokens).toEqual(local.tokens)
        expect(logits.length).toBe(local.logits.length)
        logits.forEach((l, i) => {
          expect(same(l, local.logits[i]), `step ${i}`).toBe(true)
        })
        expect(result.report.failovers).toBe(0)
        expect(result.report.receipts.invalid).toBe(0)
        expect(new Set(nodes.map((n) => n.modelId)).size).toBe(1)
      } finally {
        await client.close()
      }
    })
  }

  it('qwen3 with canaries on: an honest swarm is not convicted', { timeout: 180_000 }, async () => {
    const local = await localRun(QWEN3)
    const client = await createClient({
      bootstrap,
      model: QWEN3,
      kernels: createReferenceKernels(),
      routeTimeoutMs: 20_000,
      canaries: { rate: 0.5, seed: 3 }
    })
    try {
      const result = await client.generate(PROMPT, { maxTokens: N_TOKENS, temperature: 0 })
      expect(result.tokens).toEqual(local.tokens)
      expect(result.report.canaries.length).toBeGreaterThan(0)
      expect(result.report.excludedPeers).toEqual([])
      expect(result.report.canaries.every((v) => !v.excluded)).toBe(true)
    } finally {
      await client.close()
    }
  })

  it('layerswarm generate runs qwen2 and qwen3 files and gives the local greedy tokens', async () => {
    for (const path of [QWEN2, QWEN3]) {
      const r = runCli([
        'generate',
        '--model',
        path,
        '--prompt',
        PROMPT,
        '--max-tokens',
        String(N_TOKENS),
        '--temperature',
        '0',
        '--kernels',
        'reference',
        '--json'
      ])
      expect(r.status, r.stderr).toBe(0)
      const out = JSON.parse(r.stdout)
      expect(out.tokens).toEqual((await localRun(path)).tokens)
    }
  })
})
