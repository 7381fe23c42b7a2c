import { describe, expect, it } from 'vitest'
import { runCollusion } from '../../bench/collusion.js'
import { type SeenStep, scoreCollusion } from '../../bench/collusion-classify.js'
import { createRandom } from '../../canary/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

/*
 * Issue #39, items 3 and 4: two colluding peers on a 2-hop route (node processes logging every
 * request they get) pool what they saw and label each step real or decoy by ids, timing, sizes
 * and order (bench/collusion-classify.ts). Balanced accuracy, chance 0.5. What is asserted here
 * does not move with the host's load: no session id at both peers relayed, every decoy spanning
 * both hops, sizes at chance. Timing is not asserted here (an e2e bound of 0.65 flaked at 0.651
 * under CI load): the schedule's own plan is tested seeded, with no clock
 * (test/client/canary-schedule.test.ts), and the achieved accuracy is measured by
 * `npm run bench -- collusion` (docs/verification.md).
 */

/** Steps as the issue found them: real sessions on one id across both hops, decoys 1 ms behind a real step. */
function leakyLog(n: number): SeenStep[] {
  const rnd = createRandom(3)
  const out: SeenStep[] = []
  let t = 0
  for (let i = 0; i < n; i++) {
    t += 20 + rnd.int(20)
    for (const peer of ['a', 'b']) out.push({ peer, atMs: t, sessionId: 'real', bytes: 256, real: true })
    if (rnd.next() < 0.5)
      for (const peer of ['a', 'b']) out.push({ peer, atMs: t + 1, sessionId: `d${peer}${i}`, bytes: 256, real: false })
  }
  return out
}

describe('colluding peers telling decoys from real steps', () => {
  it('the classifiers find the leaks the issue measured', () => {
    const s = scoreCollusion(leakyLog(400))
    expect(s.ids).toBeGreaterThan(0.95)
    expect(s.timing).toBeGreaterThan(0.95)
  })

  for (const forwarding of ['relay', 'chain'] as const) {
    it(`${forwarding}: ids and the hop pattern tell nothing, sizes no more than 0.6`, { timeout: 400_000 }, async () => {
      const run = await runCollusion({
        model: GGUF_PATH,
        forwarding,
        steps: 120,
        maxTokens: 24,
        rate: 1,
        seed: 2,
        baseline: false
      })
      console.log(JSON.stringify({ forwarding, scores: run.scores }))
      expect(run.scores.realSteps).toBeGreaterThan(200)
      expect(run.scores.decoySteps).toBeGreaterThan(60)
      // exact: no session id is seen at both peers, relayed or chained (an id per hop; chained, each
      // hop forwards under its next hop's id), and every decoy spans both hops as real sessions do
      // (as many decoy sessions at each peer)
      const idsAt = (peer: string, real?: boolean) =>
        new Set(run.seen.filter((x) => x.peer === peer && (real === undefined || x.real === real)).map((x) => x.sessionId))
      expect([...idsAt('peer0')].filter((id) => idsAt('peer1').has(id))).toEqual([])
      expect(Math.abs(idsAt('peer0', false).size - idsAt('peer1', false).size)).toBeLessThanOrEqual(1)
      expect(run.scores.ids).toBe(0.5)
      expect(run.scores.sizes).toBeLessThanOrEqual(0.6)
    })
  }
})
