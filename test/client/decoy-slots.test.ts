import { describe, expect, it } from 'vitest'
import { type SeenStep, scoreCollusion } from '../../bench/collusion-classify.js'
import { createRandom, DEFAULT_CANARY_RATE } from '../../canary/index.js'
import { DecoySchedule } from '../../client/verification/canary-schedule.js'
import { pacerFor } from '../../client/verification/decoy-launcher.js'
import {
  type DecoyPacer,
  DecoySlots,
  MIN_INTERVALS,
  SLOTS_PER_STEP,
  type SlotClock
} from '../../client/verification/decoy-slots.js'

/*
 * Issue #39 item 4 at the default rate: decoy steps in slots of their own, in the real steps'
 * rhythm (client/verification/decoy-slots.ts). The pacer itself runs here on a virtual clock: a
 * client whose real steps take a route's time and then a pause of its own (head, sampling), a
 * hop logging when each step reaches it, and the collusion classifiers (bench/collusion-classify.ts)
 * scoring that log. No wall clock is read: what the network and the host's load add is measured
 * by `npm run bench -- collusion` (docs/performance.md).
 */

/** A virtual clock: sleeping moves it on. */
function virtualClock(): SlotClock & { t: number } {
  const c = {
    t: 0,
    now: () => c.t,
    // as a timer does, a sleep lets what was released before it run first
    sleep: async (ms: number) => {
      await new Promise((r) => setImmediate(r))
      c.t += ms
    }
  }
  return c
}

/**
 * `n` real steps through `pacer` with `drawn(k)` decoy steps drawn after real step k, as one hop
 * sees them: each step reaches it when it goes out and takes 20-40 ms to come back; the client
 * pauses 5-20 ms after each real answer before its next real step is ready (1.5 s once at its
 * start, as a new client's canaries build).
 */
async function simulate(
  pacer: DecoyPacer,
  clock: { t: number },
  n: number,
  drawn: (k: number) => number,
  seed = 1
): Promise<SeenStep[]> {
  const rnd = createRandom(seed)
  const seen: SeenStep[] = []
  const step = (real: boolean, id: string) => {
    seen.push({ peer: 'a', atMs: clock.t, sessionId: id, bytes: 256, real })
    clock.t += 20 + rnd.next() * 20
  }
  const decoys: Array<Promise<void>> = []
  for (let k = 0; k < n; k++) {
    // a new client's first steps are slow (its canaries build): one interval of 1.5 s
    clock.t += (k === 1 ? 1500 : 0) + 5 + rnd.next() * 15
    await pacer.beforeStep()
    step(true, 'real')
    for (let d = 0; d < drawn(k); d++)
      decoys.push(
        pacer.gate().then(() => {
          // the decoy's round trip takes the route's time; the pacer does not wait for it
          seen.push({ peer: 'a', atMs: clock.t, sessionId: `decoy${k}.${d}`, bytes: 256, real: false })
        })
      )
  }
  await pacer.drain(() => Promise.all(decoys))
  return seen.sort((a, b) => a.atMs - b.atMs)
}

describe('decoy slots: decoy steps in the real steps rhythm', () => {
  it('the default rate gets slots, a rate near one step per real step decoys beside real steps', () => {
    expect(pacerFor(DEFAULT_CANARY_RATE, createRandom(1))).toBeInstanceOf(DecoySlots)
    expect(pacerFor(0.2, createRandom(1))).toBeInstanceOf(DecoySlots)
    expect(pacerFor(1, createRandom(1))).toBeInstanceOf(DecoySchedule)
  })

  for (const [what, drawn] of [
    ['the base rate (0.03)', (rnd: () => number) => () => (rnd() < 0.03 ? 1 : 0)],
    [
      'a new client: four decoys a step for 30 steps, then 0.03',
      (rnd: () => number) => (k: number) => (k < 30 ? 4 : rnd() < 0.03 ? 1 : 0)
    ]
  ] as const)
    it(`at ${what}, timing and order label steps at chance (the issue's bound 0.6)`, async () => {
      const rnd = createRandom(5)
      const clock = virtualClock()
      const seen = await simulate(
        new DecoySlots(createRandom(2), clock),
        clock,
        6000,
        drawn(() => rnd.next())
      )
      const s = scoreCollusion(seen)
      expect(s.decoySteps).toBeGreaterThan(150)
      // one step at a time: no step has another within a few ms
      expect(s.order).toBeLessThan(0.56)
      // the gaps before and after a decoy step are a real step's: it goes when the real step would
      // have, and the real step an interval drawn from the real ones later (with no wait after
      // the decoy's answer, the gap after a decoy read ~0.85)
      expect(s.timing).toBeLessThanOrEqual(0.6)
    })

  it('decoy steps beside real steps at the same rate are told apart (why the default rate takes slots)', async () => {
    const rnd = createRandom(5)
    const clock = virtualClock()
    const seen = await simulate(new DecoySchedule(createRandom(2)), clock, 3000, () => (rnd.next() < 0.03 ? 1 : 0))
    expect(scoreCollusion(seen).timing).toBeGreaterThan(0.75)
  })

  it("one step at a time, one of the client's intervals apart: decoy slots before a real step", async () => {
    const clock = virtualClock()
    const slots = new DecoySlots(createRandom(3), clock)
    const events: string[] = []
    const realStep = async () => {
      clock.t += 30
      await slots.beforeStep()
      events.push(`real@${clock.t}`)
    }
    for (let i = 0; i < SLOTS_PER_STEP + 1; i++) void slots.gate().then(() => events.push(`decoy${i}@${clock.t}`))
    await new Promise((r) => setImmediate(r))
    expect(events).toEqual([]) // nothing goes before a real step is ready
    for (let i = 0; i < MIN_INTERVALS; i++) await realStep()
    // nor before the client's pace is known (MIN_INTERVALS between real steps)
    expect(events.every((e) => e.startsWith('real'))).toBe(true)
    events.length = 0
    const t = clock.t + 30
    for (let i = 0; i < 3; i++) await realStep()
    // a decoy step goes when a real step is ready and the next step one of the client's intervals
    // (30 ms) later; SLOTS_PER_STEP before one real step, the others wait for the next
    const slots4 = Array.from({ length: SLOTS_PER_STEP }, (_, i) => `decoy${i}@${t + 30 * i}`)
    const after = t + 30 * SLOTS_PER_STEP
    expect(events).toEqual([
      ...slots4,
      `real@${after}`,
      `decoy${SLOTS_PER_STEP}@${after + 30}`,
      `real@${after + 60}`,
      `real@${after + 90}`
    ])
  })

  it('a drain sends the waiting decoy steps one after another, and those drawn during it', async () => {
    const clock = virtualClock()
    const slots = new DecoySlots(createRandom(4), clock)
    const order: string[] = []
    const first = slots.gate().then(() => order.push('a'))
    const second = slots.gate().then(() => order.push('b'))
    await slots.drain(async () => {
      await slots.gate().then(() => order.push('c'))
      await Promise.all([first, second])
    })
    expect(order).toEqual(['a', 'b', 'c'])
    // after the drain, a new step waits again
    let late = false
    void slots.gate().then(() => {
      late = true
    })
    await new Promise((r) => setImmediate(r))
    expect(late).toBe(false)
  })
})
