import { mkdtempSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { cliAsync } from '../helpers/cli-async.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')

const cli = (args: string[], timeoutMs = 60_000) => cliAsync(args, timeoutMs)

describe('CLI against a real local swarm', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: ['--announce-interval', '300'] }))
    nodes.push(
      await startLocalNode({
        model: GGUF_PATH,
        layers: '3:4',
        bootstrap: [nodes[0].addrs[0]],
        args: ['--announce-interval', '300']
      })
    )
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('generate --bootstrap prints the reference story, in both forwarding modes', { timeout: 180_000 }, async () => {
    for (const forwarding of ['relay', 'chain']) {
      const r = await cli([
        'generate',
        '--bootstrap',
        nodes[0].addrs[0],
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '64',
        '--temperature',
        '0',
        '--forwarding',
        forwarding
      ])
      expect(r.stderr).not.toMatch(/layerswarm:/) // a "finding peers…" line may come while gossip settles
      expect(r.status).toBe(0)
      expect(r.stdout).toBe(`${ref.text}\n`)
    }
    const j = await cli([
      'generate',
      '--bootstrap',
      nodes[0].addrs[0],
      '--prompt',
      ref.prompt,
      '--max-tokens',
      '16',
      '--temperature',
      '0',
      '--json',
      '--edge-first',
      '2',
      '--edge-last',
      '1'
    ])
    const out = JSON.parse(j.stdout)
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 16))
    expect(out.report.routes[0][0]).toEqual({ peerId: nodes[0].peerId, start: 2, end: 3 }) // a sub-span of [1, 3)
  })

  it("generate --trust-file keeps the peers' canary records, and the next run goes on from them", {
    timeout: 120_000
  }, async () => {
    const trustFile = join(mkdtempSync(join(tmpdir(), 'layerswarm-cli-trust-')), 'trust.json')
    const args = [
      'generate',
      '--bootstrap',
      nodes[0].addrs[0],
      '--prompt',
      ref.prompt,
      '--max-tokens',
      '32',
      '--temperature',
      '0',
      '--json',
      '--trust-file',
      trustFile
    ]
    const observations = async () => {
      const r = await cli(args)
      expect(r.status).toBe(0)
      const out = JSON.parse(r.stdout)
      expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 32))
      return Object.fromEntries(
        out.report.canaries.map((v: { peerId: string; observations: number; canariesSent: number }) => [v.peerId, v])
      )
    }
    const first = await observations()
    expect(statSync(trustFile).mode & 0o777).toBe(0o600)
    const second = await observations()
    for (const n of nodes)
      expect(second[n.peerId].observations).toBe(first[n.peerId].observations + second[n.peerId].canariesSent)
  })

  it('generate --bootstrap fails clearly when the swarm does not cover the model', { timeout: 90_000 }, async () => {
    const r = await cli(['generate', '--bootstrap', nodes[0].addrs[0], '--prompt', 'x', '--edge-last', '0'], 60_000)
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/nobody serves block\(s\) 4/)
  })

  it('swarm prints who serves which blocks', async () => {
    const r = await cli(['swarm', '--bootstrap', nodes[0].addrs[0], '--wait', '1000'])
    expect(r.status).toBe(0)
    expect(r.stdout).toContain(nodes[0].modelId)
    expect(r.stdout).toContain(`[1, 3)  ${nodes[0].peerId}`)
    expect(r.stdout).toContain(`[3, 4)  ${nodes[1].peerId}`)
    expect(r.stdout).toMatch(/gaps: blocks 0/)
  })

  it('a node started without --layers picks the blocks nobody serves (Petals block selection)', async () => {
    // the swarm serves [1, 3) and [3, 4): blocks 0 and 4 are the bottleneck
    const one = await startLocalNode({ model: GGUF_PATH, bootstrap: [nodes[0].addrs[0]], args: ['--num-blocks', '1'] })
    const two = await startLocalNode({
      model: GGUF_PATH,
      bootstrap: [nodes[0].addrs[0], nodes[1].addrs[0], one.addrs[0]],
      args: ['--num-blocks', '2']
    })
    try {
      expect(one.layers).toEqual([0, 1]) // the earliest of the unserved windows
      expect(two.layers).toEqual([3, 5]) // the only window that still holds an unserved block (4)
    } finally {
      await Promise.all([one.stop(), two.stop()])
    }
  })

  it('a node stops cleanly on SIGTERM', async () => {
    const n = await startLocalNode({ model: GGUF_PATH, layers: '0:1' })
    await n.stop()
    expect(n.process.exitCode).toBe(0)
    expect(n.logs.some((l) => l.includes('"stopped"'))).toBe(true)
  })
})

describe('layerswarm demo', () => {
  it('runs a real local swarm, tells the story and stops everything', { timeout: 150_000 }, async () => {
    const r = await cli(['demo', '--max-tokens', '64'], 120_000)
    expect(r.status).toBe(0)
    expect(r.stdout).toBe(`${ref.text}\n`)
    expect(r.stderr).toMatch(/route:/)
    expect(r.stderr).toMatch(/all peers stopped/)
  })
})

describe('layerswarm demo --model', () => {
  it('runs the swarm on another family (qwen3, Q4_K_M) and prints one process greedy text', { timeout: 200_000 }, async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'layerswarm-demo-')), 'qwen3.gguf')
    const made = await cli(
      ['make-model', '--shape', '64,6,4,2,96,300', '--arch', 'qwen3', '--dtype', 'q4_k_m', '--out', out],
      60_000
    )
    expect(made.status).toBe(0)
    const local = await cli(
      [
        'generate',
        '--model',
        out,
        '--prompt',
        'Once upon a time',
        '--max-tokens',
        '12',
        '--temperature',
        '0',
        '--kv-dtype',
        'f32'
      ],
      60_000
    )
    expect(local.status).toBe(0)
    const r = await cli(['demo', '--model', out, '--max-tokens', '12'], 150_000)
    expect(r.status).toBe(0)
    expect(r.stdout).toBe(local.stdout)
    expect(r.stderr).toMatch(/route:\n {2}blocks \[1, /)
  })
})
