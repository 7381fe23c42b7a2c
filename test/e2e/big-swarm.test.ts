import { describe, expect, it } from 'vitest'
import { runBigSwarm } from '../../bench/big-swarm.js'

// Opt-in (issue #14): a big model file over 3 real node processes and a client gives the greedy
// tokens of one process. Skipped unless LAYERSWARM_BIG_MODEL names the file, e.g.
//   npx layerswarm make-model --shape 8b --dtype q4_k_m --out /tmp/8b-q4_k_m.gguf
//   LAYERSWARM_BIG_MODEL=/tmp/8b-q4_k_m.gguf npx vitest run test/e2e/big-swarm.test.ts
// Every part is its own process (bench/big-swarm.ts): `generate` alone, then 3 `node start`
// and a `generate --bootstrap` client with its default canaries; f32 activations on the wire.
const model = process.env.LAYERSWARM_BIG_MODEL
const tokens = Number(process.env.LAYERSWARM_BIG_TOKENS ?? 4)

describe.skipIf(!model)('a big model over 3 node processes (LAYERSWARM_BIG_MODEL)', () => {
  it('greedy tokens through the swarm equal one process, no honest node convicted', { timeout: 4 * 3_600_000 }, async () => {
    const r = (await runBigSwarm({
      model: model!,
      nodes: 3,
      tokens,
      prompt: 'Once upon a time',
      kvDType: 'f32',
      edgeFirst: 1,
      edgeLast: 1,
      timeoutMs: 3_600_000
    })) as { equal: boolean; tokens: { swarm: number[]; oneProcess: number[] }; canaries?: Array<{ excluded: boolean }> }
    expect(r.tokens.oneProcess.length).toBeGreaterThan(0)
    expect(r.tokens.swarm).toEqual(r.tokens.oneProcess)
    expect(r.equal).toBe(true)
    expect(r.canaries?.some((c) => c.excluded)).toBe(false)
  })
})
