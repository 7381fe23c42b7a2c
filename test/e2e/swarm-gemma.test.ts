import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  type ArchSpec,
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

// Gemma 2 and Gemma 3 files (issue 34) served by 3 node processes on 127.0.0.1: relayed and
// chained, the client's greedy tokens and every step's logits equal one process's. The window
// of 4 positions is crossed many times in 24 tokens, and the blocks split so that every node
// holds both sliding and global layers (layer indices are the model's, not the span's).
// Then `generate --chat` (Gemma's own template), `tokenize` and `inspect` on the files.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gemma-e2e-'))
const N_TOKENS = 24
const PROMPT = 'once upon a time'
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const FILES: Array<{ what: string; path: string; arch: ArchSpec }> = [
  {
    what: 'gemma2',
    path: join(dir, 'gemma2.gguf'),
    arch: { architecture: 'gemma2', headDim: 32, slidingWindow: 4, attnSoftcap: 5, finalSoftcap: 10 }
  },
  {
    what: 'gemma3',
    path: join(dir, 'gemma3.gguf'),
    arch: { architecture: 'gemma3', headDim: 32, slidingWindow: 4, swaPattern: 3, ropeTheta: 1000000 }
  }
]

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

beforeAll(() => {
  for (const f of FILES)
    writeRandomModel(f.path, parseShape('64,6,4,2,96,300'), { dtype: 'q8_0', seed: 31, seqLen: 128, arch: f.arch })
})

for (const f of FILES) {
  describe(`${f.what} end to end`, () => {
    const nodes: LocalNode[] = []
    let bootstrap: string[]

    beforeAll(async () => {
      nodes.push(await startLocalNode({ model: f.path, layers: '0:2', args: FAST }))
      bootstrap = [nodes[0].addrs[0]]
      nodes.push(
        ...(await Promise.all(['2:4', '4:6'].map((layers) => startLocalNode({ model: f.path, layers, bootstrap, args: FAST }))))
      )
    }, 120_000)

    afterAll(async () => {
      await Promise.all(nodes.map((n) => n.stop()))
    })

    for (const forwarding of ['relay', 'chain'] as const) {
      it(`${f.what}, 3 node processes, ${forwarding}: the greedy tokens and logits of one process`, {
        timeout: 300_000
      }, async () => {
        const local = await localRun(f.path)
        const client = await createClient({
          bootstrap,
          model: f.path,
          kernels: createReferenceKernels(),
          routeTimeoutMs: 20_000,
          edgeFirst: 0,
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
          expect(result.tokens).toEqual(local.tokens)
          expect(result.tokens.length).toBe(N_TOKENS)
          expect(logits.length).toBe(local.logits.length)
          logits.forEach((l, i) => {
            expect(same(l, local.logits[i]), `step ${i}`).toBe(true)
          })
          expect(result.report.failovers).toBe(0)
          expect(new Set(nodes.map((n) => n.modelId)).size).toBe(1)
        } finally {
          await client.close()
        }
      })
    }

    it(`${f.what} with canaries on: an honest swarm is not convicted`, { timeout: 300_000 }, async () => {
      const local = await localRun(f.path)
      const client = await createClient({
        bootstrap,
        model: f.path,
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
  })
}

describe('gemma files through the CLI', () => {
  it('generate (plain and --chat with Gemma turns), tokenize and inspect', async () => {
    for (const f of FILES) {
      const gen = (extra: string[]) =>
        runCli([
          'generate',
          '--model',
          f.path,
          '--prompt',
          PROMPT,
          '--max-tokens',
          String(N_TOKENS),
          '--temperature',
          '0',
          '--kernels',
          'reference',
          '--json',
          ...extra
        ])
      const plain = gen([])
      expect(plain.status, plain.stderr).toBe(0)
      expect(JSON.parse(plain.stdout).tokens).toEqual((await localRun(f.path)).tokens)
      const chat = gen(['--chat'])
      expect(chat.status, chat.stderr).toBe(0)
      const model = openModelFile(f.path)
      const tok = createTokenizer(model.vocabulary!)
      model.close()
      // Gemma's template: the BOS the tokenizer adds, then "<start_of_turn>user\n…".
      const want = tok.encode(`<start_of_turn>user\n${PROMPT}<end_of_turn>\n<start_of_turn>model\n`, { special: true })
      expect(JSON.parse(chat.stdout).promptTokens).toEqual(want)
      const t = runCli(['tokenize', '--model', f.path, '--json', '--text', PROMPT])
      expect(t.status, t.stderr).toBe(0)
      expect(JSON.parse(t.stdout).ids).toEqual(tok.encode(PROMPT))
      const ins = runCli(['inspect', '--model', f.path])
      expect(ins.status, ins.stderr).toBe(0)
      expect(ins.stdout).toContain(`architecture  ${f.what}`)
      expect(ins.stdout).toMatch(/family +GeGLU, post-norms, embeddings ×8, .*sliding window 4/)
    }
  }, 300_000)
})
