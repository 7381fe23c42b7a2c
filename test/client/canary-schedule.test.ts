import { describe, expect, it } from 'vitest'
import { createRandom } from '../../canary/index.js'
import { DecoySchedule, LEAD_SHARE } from '../../client/canary-schedule.js'

/** Issue #39 item 4: decoy steps go out beside the next real step, leading or following it. */
describe('DecoySchedule', () => {
  it('holds decoy steps until the next real step; about half lead it, the rest follow once it is on its way', async () => {
    const s = new DecoySchedule(createRandom(7))
    const order: string[] = []
    const n = 400
    for (let i = 0; i < n; i++) void s.gate().then(() => order.push('decoy'))
    await new Promise((r) => setImmediate(r))
    expect(order).toEqual([]) // nothing goes before a real step
    const before = s.beforeStep().then(() => order.push('real'))
    await before
    await new Promise((r) => setImmediate(r))
    const leading = order.indexOf('real')
    expect(order.length).toBe(n + 1)
    expect(Math.abs(leading / n - LEAD_SHARE)).toBeLessThan(0.1)
  })

  it('a drain lets every waiting step go, and steps drawn during it go at once', async () => {
    const s = new DecoySchedule(createRandom(1))
    let opened = 0
    void s.gate().then(() => opened++)
    await s.drain(async () => {
      await s.gate()
      opened++
    })
    await new Promise((r) => setImmediate(r))
    expect(opened).toBe(2)
    // after the drain, a new step waits again
    let late = false
    void s.gate().then(() => {
      late = true
    })
    await new Promise((r) => setImmediate(r))
    expect(late).toBe(false)
  })
})
