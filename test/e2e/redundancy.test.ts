import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildCanaryTraces, canarySetFromTraces, type DecoyStep, defaultBenignModel } from '../../canary/index.js'
import { createClient } from '../../client/index.js'
import type { HopTarget } from '../../client/session/hop.js'
import { answersDisagree, crossCheckSpan, resolveDisagreement } from '../../client/verification/redundancy.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createHost, type Host } from '../../protocol/index.js'
import { computeModelId, createReferenceKernels, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

/*
 * Issue 16, redundancy: the same decoy to two peers of one span; a disagreement beyond the
 * benign spread is settled by the reference (a bank's) or by a third peer of the span.
 */
const benign = defaultBenignModel()
const c = { benign, wire: 'f32' as const, kvLength: 8 }
const model = openModelFile(GGUF_PATH)
const modelId = computeModelId(model)
const traces = buildCanaryTraces({ model, prompts: ['Lily saw a big red ball in the park.'], tokensPerPrompt: 24, seed: 5 })
const set = canarySetFromTraces(traces, 1, [4])
model.close()

describe('redundancy: resolving a disagreement (unit)', () => {
  const honest = set.canaries[0].outputs[0].subarray(0, 64)
  const noisy = honest.map((x, i) => x + (i % 2 ? 0.5 : -0.5))
  it('two honest answers agree; a tampered one disagrees', () => {
    expect(answersDisagree(honest, honest.slice(), c)).toBe(false)
    expect(answersDisagree(honest, noisy, c)).toBe(true)
  })
  it('the reference names the liar; so do two honest peers against one; two answers alone are undecided', () => {
    const pair = [
      { peerId: 'T', output: noisy },
      { peerId: 'H', output: honest.slice() }
    ]
    expect(resolveDisagreement(pair, c, honest)).toEqual({ liars: ['T'], honest: ['H'], resolvedBy: 'reference' })
    expect(resolveDisagreement(pair, c).resolvedBy).toBe('undecided')
    const three = [...pair, { peerId: 'H2', output: honest.slice() }]
    expect(resolveDisagreement(three, c)).toEqual({ liars: ['T'], honest: ['H', 'H2'], resolvedBy: 'majority' })
  })
})

describe('redundancy: the same decoy to two real peers of one span', () => {
  const nodes: Record<string, LocalNode> = {}
  let host: Host
  const FAST = ['--kernels', 'reference', '--announce-interval', '300']
  const target = (n: LocalNode): HopTarget => ({ peerId: n.peerId, start: 1, end: 4, addrs: n.addrs })
  const L = set.canaries[0].tokens.length
  const steps: DecoyStep[] = [
    { startPosition: 0, rows: 6 },
    ...Array.from({ length: L - 6 }, (_, k) => ({ startPosition: 6 + k, rows: 1 }))
  ]
  const base = () => ({
    host,
    modelId,
    dim: set.dim,
    inputs: set.canaries[0].inputs,
    steps,
    maxLength: 64,
    benign,
    wire: 'f32' as const
  })

  beforeAll(async () => {
    nodes.tamperer = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--tamper', 'noise', '--tamper-size', '0.3', '--tamper-rate', '0.3']
    })
    const bootstrap = [nodes.tamperer.addrs[0]]
    nodes.honestA = await startLocalNode({ model: GGUF_PATH, layers: '1:4', bootstrap, args: FAST })
    nodes.honestB = await startLocalNode({ model: GGUF_PATH, layers: '1:4', bootstrap, args: FAST })
    host = await createHost({ listen: [], bootstrap: [] })
  }, 120_000)

  afterAll(async () => {
    await host?.stop()
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
  })

  it('two honest peers agree on every step', { timeout: 120_000 }, async () => {
    const r = await crossCheckSpan([target(nodes.honestA), target(nodes.honestB)], base())
    expect(r).toEqual({ agreed: true })
  })

  it('a tamperer and an honest peer disagree; the bank reference names the tamperer', { timeout: 120_000 }, async () => {
    const r = await crossCheckSpan([target(nodes.tamperer), target(nodes.honestA)], {
      ...base(),
      reference: set.canaries[0].outputs[0]
    })
    expect(r).toMatchObject({
      agreed: false,
      liars: [nodes.tamperer.peerId],
      honest: [nodes.honestA.peerId],
      resolvedBy: 'reference'
    })
  })

  it('scheduled by the canary monitor: honest pairs agree, the tamperer is named by the reference and convicted', {
    timeout: 600_000
  }, async () => {
    // ordinary canaries all but off (a fixed rate of 0.001): what convicts is the redundancy checks
    const checks: Array<{ peers: string[]; agreed: boolean; liars?: string[]; resolvedBy?: string }> = []
    let convicted = false
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      forwarding: 'relay',
      canaries: { redundancyRate: 1, adaptive: false, rate: 0.001 },
      log: (e) => {
        if (e.event === 'redundancy') checks.push(e as unknown as (typeof checks)[number])
        if (e.event === 'excluded' && e.peerId === nodes.tamperer.peerId) convicted = true
      }
    })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      for (let i = 0; i < 12 && !convicted; i++)
        await client.generate('Lily saw a big red ball', { maxTokens: 24, temperature: 0 })
    } finally {
      await client.close()
    }
    const tamperer = nodes.tamperer.peerId
    console.log(JSON.stringify({ checks: checks.length, disagreed: checks.filter((c) => !c.agreed).length, convicted }))
    expect(checks.length).toBeGreaterThan(0)
    for (const c of checks) {
      if (!c.peers.includes(tamperer)) expect(c, 'two honest peers of the span agree').toMatchObject({ agreed: true })
      else if (!c.agreed) expect(c).toMatchObject({ liars: [tamperer], resolvedBy: 'reference' })
    }
    expect(checks.some((c) => !c.agreed)).toBe(true)
    expect(convicted).toBe(true)
  })

  it('without a reference a third peer of the span settles it', { timeout: 120_000 }, async () => {
    const r = await crossCheckSpan([target(nodes.honestA), target(nodes.tamperer)], { ...base(), third: target(nodes.honestB) })
    expect(r).toMatchObject({ agreed: false, liars: [nodes.tamperer.peerId], resolvedBy: 'majority' })
    expect([...(r.honest ?? [])].sort()).toEqual([nodes.honestA.peerId, nodes.honestB.peerId].sort())
  })
})
