import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
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
})
