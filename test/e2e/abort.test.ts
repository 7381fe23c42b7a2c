/**
 * AbortOptions do stop work (issue #20): a generation aborted half-way rejects with the abort's
 * reason, and the node it ran on (a separate process, libp2p over TCP on 127.0.0.1) frees the
 * session; a node start aborted half-way rejects and leaves nothing running.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type LayerswarmClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { SwarmNode } from '../../node/daemon/server.js'
import { fetchInfo } from '../../protocol/index.js'
import { createReferenceKernels, createShard, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

async function activeSessions(client: LayerswarmClient, node: LocalNode): Promise<number> {
  const { info } = await fetchInfo(
    client.host,
    node.addrs.map((a) => multiaddr(a)),
    { signal: AbortSignal.timeout(10_000) }
  )
  return info.activeSessions
}

describe('an abort stops the work it was given to', () => {
  let node: LocalNode
  let client: LayerswarmClient

  beforeAll(async () => {
    node = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: ['--kernels', 'reference', '--announce-interval', '300']
    })
    client = await createClient({
      bootstrap: [node.addrs[0]],
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: false
    })
    await client.view.waitForRoute(1, 4, 30_000)
  }, 60_000)

  afterAll(async () => {
    await client?.close()
    await node?.stop()
  })

  it('a generation aborted after three tokens rejects with the reason, and the node frees its session', async () => {
    const ac = new AbortController()
    const reason = new DOMException('the user stopped it', 'AbortError')
    const tokens: number[] = []
    const run = (async () => {
      for await (const e of client.stream('Once upon a time', { maxTokens: 120, temperature: 0, signal: ac.signal })) {
        if (e.type !== 'token') continue
        tokens.push(e.token)
        if (tokens.length === 3) ac.abort(reason)
      }
    })()
    await expect(run).rejects.toMatchObject({ name: 'AbortError' })
    expect(tokens.length).toBeLessThan(10) // stopped, not run to maxTokens
    // the node frees the session (the client closes it, or the node's idle sweep would much later)
    const until = Date.now() + 20_000
    let active = await activeSessions(client, node)
    while (active > 0 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100))
      active = await activeSessions(client, node)
    }
    expect(active).toBe(0)
    // and serves the next generation as before
    const again = await client.generate('Once upon a time', { maxTokens: 4, temperature: 0, signal: AbortSignal.timeout(60_000) })
    expect(again.tokens.length).toBe(4)
  }, 120_000)

  it('a node start aborted before it serves rejects, and an aborted SwarmNode.create leaves no host', async () => {
    const ac = new AbortController()
    setTimeout(() => ac.abort(new DOMException('stop the start', 'AbortError')), 50)
    await expect(startLocalNode({ model: GGUF_PATH, layers: '1:4' }, { signal: ac.signal })).rejects.toMatchObject({
      name: 'AbortError'
    })
    const model = openModelFile(GGUF_PATH)
    try {
      const shard = createShard({ model, start: 1, end: 4, kernels: createReferenceKernels() })
      const init = { model, modelId: 'm', shard, listen: ['/ip4/127.0.0.1/tcp/0'], throughput: 1 }
      await expect(SwarmNode.create(init, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
      // not aborted, the same init starts and stops
      const started = await SwarmNode.create(init, { signal: AbortSignal.timeout(30_000) })
      expect(started.addrs.length).toBeGreaterThan(0)
      await started.stop()
    } finally {
      model.close()
    }
  }, 60_000)
})
