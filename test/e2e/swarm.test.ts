import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type LayerswarmClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile
} from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const N_TOKENS = 40
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

/** One process, reference kernels: the tokens and logits every split must reproduce. */
async function localRun(sampling: { temperature: number; topK?: number; seed?: number }) {
  const model = openModelFile(GGUF_PATH)
  const edge = createEdge({ model })
  const shard = createShard({ model, start: 0, end: 5 })
  const tokenizer = createTokenizer(model.vocabulary!)
  const logits: Float32Array[] = []
  const tokens: number[] = []
  for await (const t of generateTokens({
    ...sampling,
    edge,
    pipeline: createLocalPipeline([shard], 'local', 512),
    promptTokens: tokenizer.encode(ref.prompt),
    maxTokens: N_TOKENS,
    stopIds: tokenizer.stopIds,
    onLogits: (l) => logits.push(Float32Array.from(l))
  })) {
    tokens.push(t)
  }
  return { tokens, logits }
}

describe('generation through 3 node processes on 127.0.0.1', () => {
  const nodes: LocalNode[] = []
  let bootstrap: string[]

  beforeAll(async () => {
    // Overlapping spans, so every edge split has a route: A [0,2), B [2,4), C [3,5).
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '0:2', args: FAST }))
    bootstrap = [nodes[0].addrs[0]] // the client knows only A and finds B and C by their announcements
    nodes.push(
      ...(await Promise.all(['2:4', '3:5'].map((layers) => startLocalNode({ model: GGUF_PATH, layers, bootstrap, args: FAST }))))
    )
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  async function withClient<T>(
    init: { edgeFirst: number; edgeLast: number; forwarding: 'relay' | 'chain'; log?: (e: Record<string, unknown>) => void },
    fn: (c: LayerswarmClient) => Promise<T>
  ) {
    const client = await createClient({
      bootstrap,
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      routeTimeoutMs: 20_000,
      ...init
    })
    try {
      return await fn(client)
    } finally {
      await client.close()
    }
  }

  for (const forwarding of ['relay', 'chain'] as const) {
    for (const [edgeFirst, edgeLast] of [
      [1, 1],
      [0, 0],
      [2, 1]
    ]) {
      it(`${forwarding}, edge ${edgeFirst}+${edgeLast}: greedy tokens of llama2.c and bit-identical logits`, async () => {
        const local = await localRun({ temperature: 0 })
        const logits: Float32Array[] = []
        const result = await withClient({ edgeFirst, edgeLast, forwarding }, (c) =>
          c.generate(ref.prompt, { maxTokens: N_TOKENS, temperature: 0, onLogits: (l) => logits.push(Float32Array.from(l)) })
        )
        expect(result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
        expect(result.tokens).toEqual(local.tokens)
        expect(logits.length).toBe(local.logits.length)
        logits.forEach((l, i) => {
          expect(Buffer.from(l.buffer).equals(Buffer.from(local.logits[i].buffer)), `step ${i}`).toBe(true)
        })
        const route = result.report.routes[0]
        expect(route[0].start).toBe(edgeFirst)
        expect(route[route.length - 1].end).toBe(5 - edgeLast)
        expect(result.report.failovers).toBe(0)
        // every hop signed every step, and the hashes chain from what we sent to what we got
        expect(result.report.receipts.invalid).toBe(0)
        expect(result.report.receipts.checked).toBeGreaterThanOrEqual(N_TOKENS * route.length)
        expect(new Set(route.map((h) => h.peerId)).size).toBe(route.length)
      })
    }
    it(`${forwarding}: seeded sampling gives the tokens of one process`, async () => {
      const sampling = { temperature: 0.9, topK: 40, seed: 1234 }
      const local = await localRun(sampling)
      const events: Array<Record<string, unknown>> = []
      const log = (e: Record<string, unknown>) => events.push(e)
      // default speculation (ngram) and canaries: chained decoys and audits run beside the real steps
      const result = await withClient({ edgeFirst: 1, edgeLast: 1, forwarding, log }, (c) =>
        c.generate(ref.prompt, { maxTokens: N_TOKENS, ...sampling })
      )
      expect(result.tokens).toEqual(local.tokens)
      expect(result.tokens).not.toEqual(ref.generated_tokens.slice(0, N_TOKENS))
      expect(result.report.receipts.invalid).toBe(0)
      // issue #39: every hop has a session id of its own, chained as relayed (chained, each hop
      // forwards under its next hop's id, docs/protocol.md), and no id reaches two nodes: a pair
      // of colluding nodes comparing the ids they were opened with (real sessions and decoys) finds none in common
      const routeIds = events.filter((e) => e.event === 'route').flatMap((e) => e.hopSessionIds as string[])
      expect(routeIds.length).toBe(result.report.routes[0].length)
      expect(new Set(routeIds).size).toBe(routeIds.length)
      const opened = nodes.map(
        (n) => new Set(n.logs.filter((l) => l.includes('"session-open"')).map((l) => JSON.parse(l).sessionId as string))
      )
      for (const id of routeIds) expect(opened.filter((ids) => ids.has(id)).length).toBe(1)
      for (let i = 0; i < opened.length; i++)
        for (let j = i + 1; j < opened.length; j++) expect([...opened[i]].filter((id) => opened[j].has(id))).toEqual([])
    })
  }

  it('the swarm view lists who serves what', async () => {
    await withClient({ edgeFirst: 1, edgeLast: 1, forwarding: 'relay' }, async (c) => {
      await c.view.waitForRoute(0, 5, 20_000)
      const peers = await c.swarm()
      expect(peers.map((p) => [p.start, p.end])).toEqual([
        [0, 2],
        [2, 4],
        [3, 5]
      ])
      expect(new Set(peers.map((p) => p.modelId)).size).toBe(1)
    })
  })
})
