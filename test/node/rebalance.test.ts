import { describe, expect, it } from 'vitest'
import { shouldMove } from '../../node/daemon/placement/rebalance.js'

describe("Petals' rebalancing rule", () => {
  it('moves to cover a block nobody serves', () => {
    // [0,2) and [3,5) served, we serve [0,2) too: block 2 is a gap
    const d = shouldMove(5, { start: 0, end: 2, throughput: 10 }, [
      { start: 0, end: 2, throughput: 10 },
      { start: 3, end: 5, throughput: 10 }
    ])
    expect(d.bottleneckNow).toBe(0)
    expect(d.to).toEqual([1, 3])
    expect(d.bottleneckAfter).toBe(10)
  })

  it('stays when the bottleneck would rise by less than the margin', () => {
    // every block served at 10 by others; we add 3 to blocks [0,1): moving gains nothing worth it
    const others = [{ start: 0, end: 5, throughput: 10 }]
    expect(shouldMove(5, { start: 0, end: 1, throughput: 3 }, others).to).toBeUndefined()
  })

  it('moves when the bottleneck rises by more than a third (quality 0.75)', () => {
    // block 4 is slow (2); we double-serve block 0 with 10: moving to 4 lifts the bottleneck 2 → 10
    const others = [
      { start: 0, end: 4, throughput: 10 },
      { start: 4, end: 5, throughput: 2 }
    ]
    const d = shouldMove(5, { start: 0, end: 1, throughput: 10 }, others)
    expect(d.to).toEqual([4, 5])
    expect(d.bottleneckNow).toBe(2)
    expect(d.bottleneckAfter).toBe(10)
    // a small gain (2 → 2.5) is not enough
    const small = shouldMove(5, { start: 0, end: 1, throughput: 0.5 }, others)
    expect(small.to).toBeUndefined()
  })

  it('rejects spans outside the model', () => {
    expect(() => shouldMove(5, { start: 4, end: 6, throughput: 1 }, [])).toThrow(RangeError)
    expect(() => shouldMove(5, { start: 0, end: 1, throughput: 1 }, [], 1.5)).toThrow(RangeError)
  })
})
