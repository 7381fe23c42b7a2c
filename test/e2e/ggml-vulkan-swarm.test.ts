import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { GgmlShard } from '../../shards/ggml/ggml-shard.js'
import {
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile,
  parseShape,
  type ShardLike,
  writeRandomModel
} from '../../shards/index.js'
import { ggmlVulkanSkipReason } from '../helpers/ggml.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

// Issue 32: a span served by ggml-vulkan (Mesa's lavapipe where there is no GPU: .ci/run installs
// mesa-vulkan-drivers from bookworm-backports) gives the CPU engine's greedy tokens, in one
// process and through a real 2-node swarm (an engine node and a Vulkan node, separate processes
// over libp2p), on stories260K (llama.cpp's committed tokens) and on Llama-shaped Q8_0 and Q4_0
// files; the client's canaries do not convict the honest Vulkan node. The first run on a machine
// compiles ggml-vulkan's pipelines (minutes on lavapipe); Mesa caches them on disk, and the
// one-process run below warms that cache before the node (which warms up again at load) starts.

const why = ggmlVulkanSkipReason()
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-ggml-vulkan-'))
const N_TOKENS = 16
const ENGINE = ['--kernels', 'reference', '--announce-interval', '300']
const VULKAN = ['--backend', 'ggml-vulkan', '--kv-dtype', 'f16', '--announce-interval', '300']
// A cold pipeline cache: the one-process run and the node's warm-up may each compile for minutes.
const COLD_MS = 900_000

/** Greedy tokens of `prompt` through one process: the whole model on `shard`. */
async function oneProcess(path: string, prompt: string, shard: (m: ReturnType<typeof openModelFile>) => ShardLike) {
  const model = openModelFile(path)
  const span = shard(model)
  const tokenizer = createTokenizer(model.vocabulary!)
  const tokens: number[] = []
  try {
    for await (const t of generateTokens({
      temperature: 0,
      edge: createEdge({ model }),
      pipeline: createLocalPipeline([span], 'local', 128),
      promptTokens: tokenizer.encode(prompt),
      maxTokens: N_TOKENS,
      stopIds: tokenizer.stopIds
    }))
      tokens.push(t)
  } finally {
    span.close()
    model.close()
  }
  return tokens
}

const story = loadReference('stories260K_greedy_once_upon_a_time')
const llama = (dtype: 'q8_0' | 'q4_0', seed: number) => {
  const path = join(dir, `llama-${dtype}.gguf`)
  return {
    path,
    make: () => writeRandomModel(path, parseShape('64,5,4,2,96,300'), { dtype, seed, seqLen: 128 })
  }
}
const CASES = [
  { what: 'stories260K', path: GGUF_PATH, prompt: story.prompt, make: () => {} },
  { what: 'llama-shaped Q8_0', prompt: 'once upon a time', ...llama('q8_0', 31) },
  { what: 'llama-shaped Q4_0', prompt: 'once upon a time', ...llama('q4_0', 32) }
]

describe.skipIf(why !== '')('a ggml-vulkan node in a 2-node swarm', () => {
  const nodes: LocalNode[] = []
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  for (const c of CASES) {
    it(`${c.what}: the engine's greedy tokens in one process and through the swarm`, { timeout: COLD_MS }, async () => {
      c.make()
      const engine = await oneProcess(c.path, c.prompt, (model) => createShard({ model, start: 0, end: model.config.nLayers }))
      if (c.path === GGUF_PATH) expect(engine).toEqual(story.generated_tokens.slice(0, N_TOKENS))
      const vulkan = await oneProcess(
        c.path,
        c.prompt,
        (model) => new GgmlShard({ model, start: 0, end: model.config.nLayers, backend: 'ggml-vulkan' })
      )
      expect(vulkan).toEqual(engine)

      const a = await startLocalNode({ model: c.path, layers: '1:2', args: ENGINE })
      nodes.push(a)
      const gpu = await startLocalNode({
        model: c.path,
        layers: '2:4',
        bootstrap: [a.addrs[0]],
        args: VULKAN,
        startTimeoutMs: COLD_MS
      })
      nodes.push(gpu)
      const client = await createClient({
        bootstrap: [a.addrs[0]],
        model: c.path,
        kernels: createReferenceKernels(),
        routeTimeoutMs: 20_000,
        canaries: { rate: 0.5, seed: 9 }
      })
      try {
        await client.view.waitForRoute(1, 4, 20_000)
        const peer = client.view.list().find((p) => p.peerId === gpu.peerId)
        expect(peer?.backend).toBe('ggml-vulkan')
        expect(peer?.device).toMatch(/^Vulkan:/)
        const result = await client.generate(c.prompt, { maxTokens: N_TOKENS, temperature: 0 }).catch((e: Error) => {
          throw new Error(`${e.message}; the Vulkan node logged:\n${gpu.logs.slice(-8).join('\n')}`)
        })
        expect(result.tokens).toEqual(engine)
        expect(result.report.routes[0].map((h) => h.peerId)).toEqual([a.peerId, gpu.peerId])
        expect(result.report.excludedPeers).toEqual([])
        const verdict = result.report.canaries.find((v) => v.peerId === gpu.peerId)
        expect(verdict?.observations ?? 0).toBeGreaterThan(0)
        expect(verdict?.excluded).toBe(false)
      } finally {
        await client.close()
        await Promise.all([a.stop(), gpu.stop()])
      }
    })
  }
})
