import { describe, expect, it } from 'vitest'
import { NoRouteError } from '../../client/errors.js'
import { planRoute, type RouteCandidate } from '../../client/routing/route.js'

const peer = (peerId: string, start: number, end: number, rttMs = 1, throughput = 100): RouteCandidate => ({
  peerId,
  start,
  end,
  rttMs,
  throughput
})

describe('planRoute', () => {
  it('covers the range exactly with sub-spans of what peers hold', () => {
    const route = planRoute([peer('a', 0, 3), peer('b', 2, 5)], 1, 4)
    expect(route[0]).toEqual({ peerId: 'a', start: 1, end: expect.any(Number) })
    expect(route[route.length - 1].end).toBe(4)
    for (let i = 1; i < route.length; i++) expect(route[i].start).toBe(route[i - 1].end)
  })

  it('prefers fewer, faster hops', () => {
    const route = planRoute([peer('a', 0, 2), peer('b', 2, 4), peer('big', 0, 4, 1, 200)], 0, 4)
    expect(route).toEqual([{ peerId: 'big', start: 0, end: 4 }])
    const slowBig = planRoute([peer('a', 0, 2, 1, 1000), peer('b', 2, 4, 1, 1000), peer('big', 0, 4, 1, 2)], 0, 4)
    expect(slowBig.map((h) => h.peerId)).toEqual(['a', 'b'])
  })

  it('routes around a far peer', () => {
    const route = planRoute([peer('near', 0, 4, 1), peer('far', 0, 4, 500)], 0, 4)
    expect(route).toEqual([{ peerId: 'near', start: 0, end: 4 }])
  })

  it('reports the gap when blocks are not covered', () => {
    expect(() => planRoute([peer('a', 0, 2), peer('b', 3, 5)], 0, 5)).toThrow(NoRouteError)
    expect(() => planRoute([peer('a', 0, 2), peer('b', 3, 5)], 0, 5)).toThrow(/block\(s\) 2/)
    expect(planRoute([], 3, 3)).toEqual([])
  })
})
