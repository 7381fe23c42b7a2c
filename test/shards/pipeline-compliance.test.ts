import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RemotePipeline, SwarmView } from '../../client/index.js'
import { composePipeline } from '../../client/session/edge-pipeline.js'
import { startLocalNode } from '../../node/cli/local-swarm.js'
import { createHost, type Host } from '../../protocol/index.js'
import {
  type BlockPipeline,
  computeModelId,
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  type ModelFile,
  openModelFile
} from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

/*
 * The contract every `BlockPipeline` implementation keeps (shards/generate.ts), run against each:
 * a prompt forwarded in one batch gives the same bits as one process running blocks [0, n) on the
 * reference kernels (f32 wire for remote ones: DESIGN invariant 2); a step that starts before the
 * pipeline's length rewinds and recomputes the same bits; an aborted signal rejects; close()
 * resolves. A new pipeline is added to PIPELINES and must pass as is. The remote one runs through
 * a real node process on 127.0.0.1 (libp2p, Noise, yamux, protobuf).
 */

let model: ModelFile
let node: Awaited<ReturnType<typeof startLocalNode>> | undefined
let host: Host | undefined

beforeAll(async () => {
  model = openModelFile(GGUF_PATH)
  // the one-process reference keeps an f32 KV cache; nodes default to f16 (docs/formats.md)
  node = await startLocalNode({ model: GGUF_PATH, layers: `0:${model.config.nLayers}`, args: ['--kv-dtype', 'f32'] })
  host = await createHost({ listen: [], bootstrap: [node.addrs[0]] })
}, 60_000)

afterAll(async () => {
  await host?.stop()
  await node?.stop()
  model?.close()
})

const MAX_LENGTH = 64
let sessions = 0

const PIPELINES: ReadonlyArray<[string, () => Promise<BlockPipeline>]> = [
  [
    'local, one shard',
    async () =>
      createLocalPipeline(
        [createShard({ model, start: 0, end: model.config.nLayers, kernels: createReferenceKernels() })],
        `s${++sessions}`,
        MAX_LENGTH
      )
  ],
  [
    'local, two shards',
    async () =>
      createLocalPipeline(
        [
          createShard({ model, start: 0, end: 2, kernels: createReferenceKernels() }),
          createShard({ model, start: 2, end: model.config.nLayers, kernels: createReferenceKernels() })
        ],
        `s${++sessions}`,
        MAX_LENGTH
      )
  ],
  ['remote (RemotePipeline, relay, one node process)', async () => remote('relay', 0, model.config.nLayers)],
  ['remote (RemotePipeline, chain, one node process)', async () => remote('chain', 0, model.config.nLayers)],
  [
    'composed (client/session/edge-pipeline.ts: local first block, remote middle, local last block)',
    async () => {
      const n = model.config.nLayers
      const first = createShard({ model, start: 0, end: 1, kernels: createReferenceKernels() })
      const last = createShard({ model, start: n - 1, end: n, kernels: createReferenceKernels() })
      return composePipeline(first, remote('relay', 1, n - 1), last, `s${++sessions}`, MAX_LENGTH)
    }
  ]
]

/** A RemotePipeline over blocks [from, to) of the node process (a sub-span of what it serves). */
function remote(forwarding: 'relay' | 'chain', from: number, to: number): RemotePipeline {
  const modelId = computeModelId(model)
  const view = new SwarmView(host!, modelId, [node!.addrs[0]])
  return new RemotePipeline({
    host: host!,
    view,
    modelId,
    dim: model.config.dim,
    from,
    to,
    sessionId: `compliance-${++sessions}`,
    maxLength: MAX_LENGTH,
    forwarding,
    wireDtype: 'f32',
    stepTimeoutMs: 30_000,
    banMs: 1_000,
    maxFailovers: 0,
    routeTimeoutMs: 30_000
  })
}

/** Blocks [0, n) in one process on the reference kernels: what every pipeline must reproduce. */
function reference(x: Float32Array, rows: number): Float32Array {
  const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels: createReferenceKernels() })
  shard.openSession('reference', { maxLength: MAX_LENGTH })
  return shard.forward('reference', x.slice(), 0).slice(0, rows * model.config.dim)
}

function prompt(rows: number): Float32Array {
  const edge = createEdge({ model })
  return edge.embed(Array.from({ length: rows }, (_, i) => 1 + ((i * 37) % (model.config.vocabSize - 1))))
}

describe.each(PIPELINES)('BlockPipeline compliance: %s', (_name, make) => {
  it('matches one process bit for bit, rewinds to recompute the same bits, rejects when aborted, closes', async () => {
    const pipeline = await make()
    try {
      const dim = model.config.dim
      const rows = 6
      const x = prompt(rows)
      const want = reference(x, rows)
      const got = await pipeline.forward(x.slice(), 0)
      expect(got.length).toBe(rows * dim)
      expect(got).toEqual(want)
      // a step before the current length rewinds: the last two rows again, the same bits
      const again = await pipeline.forward(x.slice((rows - 2) * dim), rows - 2)
      expect(again).toEqual(want.slice((rows - 2) * dim))
      const aborted = AbortSignal.abort()
      await expect(pipeline.forward(x.slice(0, dim), rows, { signal: aborted })).rejects.toThrow()
    } finally {
      await pipeline.close()
    }
  })
})
