import { describe, expect, it } from 'vitest'
import { EWMA_WEIGHT, MAX_DECODE_ROWS, PeerLoad, ROUTE_JITTER } from '../../client/routing/peer-load.js'
import { hopCostMs, planRoute, type RouteCandidate } from '../../client/routing/route.js'

// Load-aware routes (issue #18): a peer's announced queue and the client's own measured step
// times go into the route cost, and a per-client tie-break spreads clients over equal replicas.

const peer = (peerId: string, extra: Partial<RouteCandidate> = {}): RouteCandidate => ({
  peerId,
  start: 0,
  end: 4,
  rttMs: 2,
  throughput: 100, // 10 ms per step of the span, 2.5 ms per block
  ...extra
})

describe('hopCostMs with load', () => {
  it('adds one span step per queued step and uses the measured ms per block once known', () => {
    expect(hopCostMs(peer('a'), 0, 4)).toBeCloseTo(2 + 10)
    expect(hopCostMs(peer('a', { queuedSteps: 3 }), 0, 4)).toBeCloseTo(2 + 10 + 30)
    expect(hopCostMs(peer('a', { measuredMsPerBlock: 7 }), 0, 2)).toBeCloseTo(2 + 14)
    expect(hopCostMs(peer('a', { jitter: 0.04 }), 0, 4)).toBeCloseTo(12 * 1.04)
    // no throughput reported: an assumed 50 ms per block
    expect(hopCostMs(peer('a', { throughput: 0 }), 0, 1)).toBeCloseTo(52)
  })

  it('routes around a queue and around a peer the client measured slow', () => {
    const busy = [peer('a', { queuedSteps: 5 }), peer('b')]
    expect(planRoute(busy, 0, 4)).toEqual([{ peerId: 'b', start: 0, end: 4 }])
    // b reports the better throughput, but this client measured it 10× slower than reported
    const measured = [peer('a', { throughput: 50 }), peer('b', { measuredMsPerBlock: 25 })]
    expect(planRoute(measured, 0, 4)).toEqual([{ peerId: 'a', start: 0, end: 4 }])
  })

  it('clients with different tie-breaks spread over two equal replicas', () => {
    const picks = new Map<string, number>()
    let seed = 1
    const random = () => {
      seed = (seed * 48271) % 2147483647
      return seed / 2147483647
    }
    for (let client = 0; client < 200; client++) {
      const load = new PeerLoad(random)
      const candidates = ['r1', 'r2'].map((id) => peer(id, { jitter: load.jitter(id) }))
      const [hop] = planRoute(candidates, 0, 4)
      picks.set(hop.peerId, (picks.get(hop.peerId) ?? 0) + 1)
    }
    expect(picks.get('r1')).toBeGreaterThan(60)
    expect(picks.get('r2')).toBeGreaterThan(60)
  })
})

describe('PeerLoad', () => {
  it('keeps a moving average of ms per block past the round trip, decode steps only', () => {
    const load = new PeerLoad()
    expect(load.measuredMsPerBlock('p')).toBeUndefined()
    load.observe('p', 22, 4, 1, 2) // (22 - 2) / 4 = 5
    expect(load.measuredMsPerBlock('p')).toBe(5)
    load.observe('p', 42, 4, 1, 2) // sample 10
    expect(load.measuredMsPerBlock('p')).toBeCloseTo(5 + EWMA_WEIGHT * 5)
    load.observe('p', 10_000, 4, MAX_DECODE_ROWS + 1, 2) // a prefill: ignored
    load.observe('p', Number.NaN, 4, 1)
    expect(load.measuredMsPerBlock('p')).toBeCloseTo(5 + EWMA_WEIGHT * 5)
    load.forget('p')
    expect(load.measuredMsPerBlock('p')).toBeUndefined()
  })

  it('gives each peer one fixed tie-break below ROUTE_JITTER', () => {
    const load = new PeerLoad()
    const j = load.jitter('x')
    expect(j).toBeGreaterThanOrEqual(0)
    expect(j).toBeLessThan(ROUTE_JITTER)
    expect(load.jitter('x')).toBe(j)
  })
})
