import { describe, expect, it } from 'vitest'
import { blockThroughputs, chooseSpan } from '../../node/daemon/placement/span-selection.js'

describe("Petals' block selection", () => {
  it('an empty swarm starts at block 0', () => {
    expect(chooseSpan(5, 2, [])).toEqual([0, 2])
  })
  it('fills the blocks nobody serves', () => {
    expect(chooseSpan(5, 2, [{ start: 0, end: 3, throughput: 10 }])).toEqual([3, 5])
    expect(
      chooseSpan(6, 2, [
        { start: 0, end: 2, throughput: 10 },
        { start: 4, end: 6, throughput: 10 }
      ])
    ).toEqual([2, 4])
  })
  it('raises the bottleneck: joins the weakest blocks', () => {
    const spans = [
      { start: 0, end: 4, throughput: 10 },
      { start: 0, end: 2, throughput: 50 }
    ]
    expect(blockThroughputs(4, spans)).toEqual([60, 60, 10, 10])
    expect(chooseSpan(4, 2, spans)).toEqual([2, 4])
  })
})
