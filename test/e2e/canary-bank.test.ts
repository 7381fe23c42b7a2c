import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ClientInit, createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { runCli } from '../helpers/cli.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

/*
 * Issue 16: a client holding only its 1 + 1 edge blocks and a canary bank (built by
 * `layerswarm canary build`) convicts the same tamperers as a client holding the whole model, and
 * excludes no honest peer. Every tamperer serves the whole remote span [1,4) (the cheapest route,
 * so each is tried in turn), two honest peers serve [1,2) and [2,4). BANK_CHECKS sets the benign
 * run's canary checks (the bar is 10,000; CI runs a short slice).
 */
const CHECKS = Number(process.env.BANK_CHECKS ?? 300)
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const TAMPERERS: Record<string, string[]> = {
  noise: ['--tamper', 'noise', '--tamper-size', '0.5'],
  zero: ['--tamper', 'zero', '--tamper-size', '0.5'],
  skip: ['--tamper', 'skip'],
  bias: ['--tamper', 'bias', '--tamper-size', '0.5'],
  scale: ['--tamper', 'scale', '--tamper-size', '0.5'],
  lowprec: ['--tamper', 'lowprec', '--tamper-size', '2']
}
const ref = loadReference('stories260K_greedy_once_upon_a_time')

describe('thin client + canary bank verifies as a full client does', () => {
  const tamperers: Record<string, LocalNode> = {}
  const honest: LocalNode[] = []
  let bootstrap: string[]
  const dir = mkdtempSync(join(tmpdir(), 'layerswarm-bank-e2e-'))
  const bank = join(dir, 'bank')

  beforeAll(async () => {
    const built = runCli(['canary', 'build', '--model', GGUF_PATH, '--count', '8', '--out', bank], 120_000)
    expect(built.status, built.stderr).toBe(0)
    expect(JSON.parse(built.stdout)).toMatchObject({ canaries: 8, levels: 6, key: join(dir, 'canary-bank-key') })
    const names = Object.keys(TAMPERERS)
    tamperers[names[0]] = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args: [...FAST, ...TAMPERERS[names[0]]] })
    const first = [tamperers[names[0]].addrs[0]]
    const rest = names
      .slice(1)
      .map((n) => startLocalNode({ model: GGUF_PATH, layers: '1:4', bootstrap: first, args: [...FAST, ...TAMPERERS[n]] }))
    const honestNodes = ['1:2', '2:4'].map((layers) => startLocalNode({ model: GGUF_PATH, layers, bootstrap: first, args: FAST }))
    const started = await Promise.all([...rest, ...honestNodes])
    for (const [i, n] of names.slice(1).entries()) tamperers[n] = started[i]
    honest.push(...started.slice(rest.length))
    bootstrap = [...Object.values(tamperers), ...honest].map((n) => n.addrs[0])
  }, 180_000)

  afterAll(async () => {
    await Promise.all([...Object.values(tamperers), ...honest].map((n) => n.stop()))
  })

  /** Generate until every tamperer is convicted (each conviction moves the route to the next). */
  async function convictAll(init: Partial<ClientInit>): Promise<Set<string>> {
    const client = await createClient({ bootstrap, model: GGUF_PATH, kernels: createReferenceKernels(), ...init })
    const convicted = new Set<string>()
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      for (let round = 0; round < 6 && convicted.size < Object.keys(tamperers).length; round++) {
        const result = await client.generate(ref.prompt, { maxTokens: 64, temperature: 0 })
        expect(result.tokens).toEqual(ref.generated_tokens) // rolled back to the honest text
        for (const p of result.report.excludedPeers) convicted.add(p)
        for (const h of honest) expect(result.report.excludedPeers).not.toContain(h.peerId)
      }
    } finally {
      await client.close()
    }
    return convicted
  }

  it('convicts every tamper mode, as the full client does, and reads no middle block', { timeout: 900_000 }, async () => {
    const all = Object.values(tamperers)
      .map((n) => n.peerId)
      .sort()
    const full = await convictAll({})
    expect([...full].sort()).toEqual(all)
    // the thin client: a guard throws BlockNotHeldError on any read of blocks [1, 4)
    const thin = await convictAll({ canaryBank: { path: bank } })
    expect([...thin].sort()).toEqual(all)
  })

  it('the CLI with --canary-bank convicts too and returns the honest text', { timeout: 300_000 }, async () => {
    const args = ['generate', '--bootstrap', bootstrap.join(','), '--model', GGUF_PATH, '--prompt', ref.prompt]
    const run = runCli(
      [...args, '--max-tokens', '32', '--temperature', '0', '--wire', 'f32', '--canary-bank', bank, '--json'],
      240_000
    )
    expect(run.status, run.stderr).toBe(0)
    const result = JSON.parse(run.stdout)
    expect(result.tokens).toEqual(ref.generated_tokens.slice(0, 32))
    const fresh = runCli([...args, '--canary-bank', join(dir, 'junk'), '--max-tokens', '4'], 60_000)
    expect(fresh.status).not.toBe(0)
  })

  it(`benign: zero exclusions over ${CHECKS} checks of honest peers by a thin client`, { timeout: 3_600_000 }, async () => {
    await Promise.all(Object.values(tamperers).map((n) => n.stop()))
    const client = await createClient({
      bootstrap: honest.map((n) => n.addrs[0]),
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaryBank: { path: bank },
      canaries: { rate: 1, adaptive: false }
    })
    let checks = 0
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      while (checks < CHECKS) {
        const result = await client.generate(ref.prompt, { maxTokens: 200, temperature: 0 })
        expect(result.tokens.slice(0, 64)).toEqual(ref.generated_tokens)
        expect(result.report.excludedPeers).toEqual([])
        checks = result.report.canaries.reduce((n, v) => n + v.observations, 0)
        for (const v of result.report.canaries) expect(v.excluded).toBe(false)
      }
    } finally {
      await client.close()
    }
    console.log(JSON.stringify({ benignChecks: checks, exclusions: 0 }))
  })
})
