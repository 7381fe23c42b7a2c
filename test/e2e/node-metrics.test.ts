import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { readNodeHoldings } from '../../node/cli/metrics-scrape.js'
import { createReferenceKernels, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

describe('node --metrics', () => {
  let node: LocalNode
  beforeAll(async () => {
    node = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args: ['--kernels', 'reference', '--metrics', '127.0.0.1:0'] })
  })
  afterAll(async () => {
    await node.stop()
  })

  it('exposes Prometheus counters of real traffic', async () => {
    const client = await createClient({
      bootstrap: [node.addrs[0]],
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: false
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      await client.generate('Once upon a time', { maxTokens: 10, temperature: 0 })
    } finally {
      await client.close()
    }
    const line = node.logs.find((l) => l.includes('"msg":"metrics"'))
    expect(line).toBeDefined()
    const { url } = JSON.parse(line!) as { url: string }
    const text = await (await fetch(url)).text()
    const tokens = text
      .split('\n')
      .filter((l) => l.startsWith('layerswarm_tokens_total{'))
      .map((l) => Number(l.split(' ').at(-1)))
    expect(tokens.reduce((a, b) => a + b, 0)).toBe(5 + 9) // the prompt (BOS + 4 tokens), then 9 decode steps
    expect(text).toContain('layerswarm_step_duration_seconds_bucket')
    expect(text).toContain('layerswarm_wire_bytes_total')
    expect(text).toMatch(/layerswarm_sessions_total\{[^}]*\} 1/)
  })

  it('shows the KV caches and bytes a session holds, and none once it closed', async () => {
    const client = await createClient({
      bootstrap: [node.addrs[0]],
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: false
    })
    let open: Awaited<ReturnType<typeof readNodeHoldings>>
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      // mid-generation, the session is open on the node
      const tokens = client.stream('Once upon a time', { maxTokens: 8, temperature: 0 })
      await tokens.next()
      await tokens.next()
      open = await readNodeHoldings(node)
      while (!(await tokens.next()).done) {}
    } finally {
      await client.close()
    }
    // one session over blocks [1,4): keys and values of 3 blocks, preallocated to its max length
    expect(open.sessions).toBe(1)
    expect(open.kvCaches).toBe(1)
    expect(open.kvTokens).toBeGreaterThan(0)
    const model = openModelFile(GGUF_PATH)
    const { kvDim } = model.config
    model.close()
    // (local swarms run an f32 KV cache: 4 bytes a value)
    expect(open.kvBytes).toBe(3 * 2 * open.kvTokens * kvDim * 4)
    expect(open.rssMiB).toBeGreaterThan(0)
    // the generation closed its session: the node frees it at once (no idle timeout involved)
    let closed = await readNodeHoldings(node)
    for (let i = 0; i < 50 && closed.kvCaches > 0; i++) {
      await new Promise((r) => setTimeout(r, 100))
      closed = await readNodeHoldings(node)
    }
    expect(closed).toMatchObject({ sessions: 0, kvTokens: 0, kvCaches: 0, kvBytes: 0 })
  })

  // issue #39: a page whose name resolves to 127.0.0.1 (DNS rebinding) reaches the socket, but
  // its Host header names it; the endpoint answers only to this machine's names
  it('answers 403 to a Host header that names another site, 200 to loopback names', async () => {
    const line = node.logs.find((l) => l.includes('"msg":"metrics"'))
    const url = new URL((JSON.parse(line!) as { url: string }).url)
    const get = (host: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: url.hostname, port: url.port, path: '/metrics', headers: { host } }, (res) => {
          let body = ''
          res.on('data', (c: Buffer) => {
            body += c.toString()
          })
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
        })
        req.on('error', reject)
        req.end()
      })
    for (const host of [`rebind.example:${url.port}`, 'rebind.example', `10.0.0.5:${url.port}`]) {
      const r = await get(host)
      expect(r.status, host).toBe(403)
      expect(r.body).not.toContain('layerswarm_')
    }
    for (const host of [`127.0.0.1:${url.port}`, `localhost:${url.port}`]) {
      const r = await get(host)
      expect(r.status, host).toBe(200)
      expect(r.body).toContain('layerswarm_')
    }
  })
})
