import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { parseShape, writeRandomModel } from '../../shards/formats/random-model.js'

// Issue 16: an honest node with an f16 KV cache (the node default) was convicted on a 256-dim
// Q4_K_M file. At dim 256 nodes and clients run the native kernels (shards/kernels/kernel-policy.ts),
// which quantise activations for block-type and Q8_0 matrices: a cache's rounding then moves a
// span's output by ~1 %, where the benign classes had been measured on the reference kernels
// only (canary/calibrate.ts now measures native profiles and native references too). Every KV
// dtype a node can announce, on Q4_K_M and Q8_0 weights: real node processes, each its own
// swarm serving the whole remote span [1,3), canaries on every step, zero convictions.

const CHECKS = Number(process.env.KV_CANARY_CHECKS ?? 200)
const TOKENS = 64
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-canary-kv-q-'))
const KV_DTYPES = ['f32', 'f16', 'q8_0'] as const
const WEIGHTS = ['q4_k_m', 'q8_0'] as const

describe('honest nodes of every KV dtype on quantised weights are never convicted', () => {
  const nodes = new Map<string, LocalNode>()
  const models = new Map<string, string>()

  beforeAll(async () => {
    for (const w of WEIGHTS) {
      const path = join(dir, `m256-${w}.gguf`)
      // held out from the calibration models (canary/default-model.ts: 256,3,4,2,512,300, seed 7)
      writeRandomModel(path, parseShape('256,4,4,4,512,512'), { dtype: w, seed: 11, seqLen: 512 })
      models.set(w, path)
      for (const kv of KV_DTYPES)
        nodes.set(
          `${w}/${kv}`,
          await startLocalNode({ model: path, layers: '1:3', args: ['--kv-dtype', kv, '--announce-interval', '300'] })
        )
    }
    // a swarm of its own: an f16-cache node adding noise of 5 % of the output's scale
    nodes.set(
      'tamperer',
      await startLocalNode({
        model: models.get('q4_k_m')!,
        layers: '1:3',
        args: ['--kv-dtype', 'f16', '--announce-interval', '300', '--tamper', 'noise', '--tamper-size', '0.05']
      })
    )
  }, 120_000)

  afterAll(async () => {
    await Promise.all([...nodes.values()].map((n) => n.stop()))
    rmSync(dir, { recursive: true, force: true })
  })

  it('an f16-cache node adding 5 % noise on Q4_K_M is still convicted', { timeout: 300_000 }, async () => {
    const tamperer = nodes.get('tamperer')!
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: [tamperer.addrs[0]],
      model: models.get('q4_k_m')!,
      canaries: { rate: 1, adaptive: false },
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 3, 20_000)
      // once convicted nobody is left to serve [1,3): the generation ends without a route
      await expect(client.generate('Once upon a time', { maxTokens: TOKENS, temperature: 0 })).rejects.toMatchObject({
        code: 'NO_ROUTE'
      })
      expect(events.some((e) => e.event === 'excluded' && e.peerId === tamperer.peerId)).toBe(true)
    } finally {
      await client.close()
    }
  })

  for (const w of WEIGHTS)
    for (const kv of KV_DTYPES)
      it(`weights ${w}, KV ${kv}: ≥ ${CHECKS} canary checks, no conviction`, { timeout: 600_000 }, async () => {
        const node = nodes.get(`${w}/${kv}`)!
        let checks = 0
        let excluded = 0
        for (let c = 0; checks < CHECKS; c++) {
          const client = await createClient({
            bootstrap: [node.addrs[0]],
            model: models.get(w)!,
            canaries: { rate: 1, adaptive: false }
          })
          try {
            await client.view.waitForRoute(1, 3, 20_000)
            const { report } = await client.generate(`Story ${c}: once upon a time`, { maxTokens: TOKENS, temperature: 1 })
            const v = report.canaries.find((x) => x.peerId === node.peerId)
            checks += v?.canariesSent ?? 0
            excluded += report.excludedPeers.length
            expect(report.excludedPeers).toEqual([])
            expect(v?.excluded).toBe(false)
          } finally {
            await client.close()
          }
        }
        expect(excluded).toBe(0)
        expect(checks).toBeGreaterThanOrEqual(CHECKS)
      })
})
