import { describe, expect, it } from 'vitest'
import { runScale } from '../../bench/scale.js'

// Issue #38: the scale bench's harness at a size this host runs (its figures come from
// `npm run bench -- scale`, docs/performance.md). Real hosts on loopback TCP, real SwarmView.
describe('bench scale, small', () => {
  it('6 peers over 6 blocks: every client covers the model, routes, and no generation fails', { timeout: 300_000 }, async () => {
    const r = (await runScale({
      peers: 6,
      clients: 2,
      churnPctPerMin: 0,
      blocks: 6,
      intervalMs: 3_000,
      durationMs: 3_000,
      links: 2,
      refreshMs: 500,
      coverageTimeoutMs: 120_000
    })) as {
      coverage: { allCovered: boolean }
      viewPeers: { min: number; live: number }
      routeQuality: { p50: number | null }
      generations: { attempts: number; failed: number }
    }
    expect(r.coverage.allCovered).toBe(true)
    expect(r.viewPeers.live).toBe(6)
    expect(r.generations.attempts).toBeGreaterThan(0)
    expect(r.generations.failed).toBe(0)
    // the route a client plans is never cheaper than the best the whole swarm allows
    expect(r.routeQuality.p50).toBeGreaterThanOrEqual(1)
  })
})
