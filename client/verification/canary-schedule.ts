import type { Random } from '../../canary/index.js'
import type { DecoyPacer } from './decoy-slots.js'

/*
 * When decoy steps go out (issue #39, item 4). Decoy steps used to launch right after the real
 * step that drew them, so at a hop the gap before a decoy step was a few milliseconds and the gap
 * after it a whole token's time, while a real step had a token's time on both sides: "within 10 ms
 * of the previous step is a decoy" labelled 75-81 % of steps correctly. Now a decoy step drawn
 * after real step k waits until it is open (a new decoy's sessions first) and for the next real
 * step, and goes out beside it, planned by `planBeside`:
 *  - it leads (goes before the real step, which waits for it) or follows, probability 1/2 each;
 *  - its distance from the real step is drawn from one jitter distribution whichever side it is
 *    on (1 to MAX_OFFSET_TURNS event-loop turns), and the real step itself is released at its
 *    turn like the decoy steps, so what holds the client's event loop back holds all alike.
 * So within a cluster the first step is real or decoy alike, and the gap between the two says
 * nothing of which came first: the planned gaps before (and after) a real step and a decoy step
 * beside it have one distribution (test/client/canary-schedule.test.ts checks the plan itself,
 * seeded, with no clock). The first attempt's followers went at once and leaders one tick early:
 * the gap inside a cluster told the order, and with it which step was real. What the plan cannot
 * hide is a real step no decoy step is beside (a token's time on both sides): at a decoy rate r
 * per real step their share is about 1 - r, so timing stays telling at low rates
 * (docs/verification.md, "Decoys two colluding peers cannot tell apart", has `bench collusion`).
 */

/** The share of decoy steps that go out before the real step they go beside. */
export const LEAD_SHARE = 0.5
/**
 * Farthest a decoy step goes from its real step, in event-loop turns (setImmediate): 1 to this
 * many, uniform. Turns, not milliseconds: a node batches the steps that reach it together
 * (node/step-batch-run.ts) and reads one that comes while it computes only after that compute, so
 * a follower sent a few ms behind its real step landed a whole compute behind it there while a
 * leader landed right before it (bench collusion read 0.63-0.72 by timing, chained, with 1-4 ms
 * offsets); a few turns keep both sides of a cluster inside one batch.
 */
export const MAX_OFFSET_TURNS = 3

/** Where one decoy step goes: before or after the real step it goes beside, and how far from it. */
export interface BesidePlan {
  readonly lead: boolean
  readonly offsetTurns: number
}

/** The plan of one decoy step (seeded: a test replays it with no clock). */
export function planBeside(random: Random): BesidePlan {
  const lead = random.next() < LEAD_SHARE
  return { lead, offsetTurns: 1 + random.int(MAX_OFFSET_TURNS) }
}

/**
 * The plan of one cluster: a real step and `decoys` decoy steps beside it (planBeside each). The
 * real step goes once its farthest leader is that far ahead; each leader its offset before it,
 * each follower its offset after. Times in event-loop turns from the cluster's start.
 */
export function planCluster(random: Random, decoys: number): { realAt: number; decoyAt: number[] } {
  const plans = Array.from({ length: decoys }, () => planBeside(random))
  const realAt = Math.max(0, ...plans.filter((p) => p.lead).map((p) => p.offsetTurns))
  return { realAt, decoyAt: plans.map((p) => (p.lead ? realAt - p.offsetTurns : realAt + p.offsetTurns)) }
}

/**
 * The planned send times (ms) of real steps at `realAtMs` and the decoy steps beside them, with
 * `decoysBeside[k]` decoy steps beside real step k and an event-loop turn taking `turnMs`: what a
 * hop would see if the network added nothing. Leaders shift their real step (and the steps after
 * it) by the turns they ask.
 */
export function plannedTimeline(
  random: Random,
  realAtMs: readonly number[],
  decoysBeside: readonly number[],
  turnMs = 0.2
): Array<{ atMs: number; real: boolean }> {
  const out: Array<{ atMs: number; real: boolean }> = []
  let delayMs = 0
  realAtMs.forEach((t, k) => {
    const c = planCluster(random, decoysBeside[k] ?? 0)
    const start = t + delayMs
    delayMs += c.realAt * turnMs
    out.push({ atMs: start + c.realAt * turnMs, real: true })
    for (const d of c.decoyAt) out.push({ atMs: start + d * turnMs, real: false })
  })
  return out.sort((a, b) => a.atMs - b.atMs)
}

/**
 * Gates of decoy steps: each opens beside the next real step (as planned) or at the session's
 * end. Used from a base rate of BESIDE_FROM_RATE (decoy-slots.ts has the slots below it).
 */
export class DecoySchedule implements DecoyPacer {
  private waiting: Array<() => void> = []
  /** Drains under way (drain): decoy steps drawn meanwhile go at once. */
  private draining = 0
  /** Decoy steps of a cluster under way, waiting for their turn. */
  private readonly following = new Set<() => void>()

  constructor(private readonly random: Random) {}

  /** The gate of one decoy step drawn now: it goes out beside the next real step. */
  gate(): Promise<void> {
    if (this.draining > 0) return Promise.resolve()
    return new Promise<void>((open) => this.waiting.push(open))
  }

  /**
   * A real step is about to go out (the caller sends it once this resolves): it and the waiting
   * decoy steps are one cluster (planCluster), each released at its turn, the real step too, so
   * whatever holds the client's event loop back holds every member alike.
   */
  async beforeStep(): Promise<void> {
    const waiting = this.waiting.splice(0)
    if (waiting.length === 0) return
    const c = planCluster(this.random, waiting.length)
    waiting.forEach((open, i) => {
      this.following.add(open)
      afterTurns(c.decoyAt[i], () => {
        if (this.following.delete(open)) open()
      })
    })
    await new Promise<void>((r) => afterTurns(c.realAt, r))
  }

  /**
   * While `during` runs no real step may follow (a session ends, the client closes): every decoy
   * step waiting goes now, and so does every one drawn meanwhile (a decoy still opening), or
   * whoever waits for them would wait for ever.
   */
  async drain<T>(during: () => Promise<T>): Promise<T> {
    this.draining++
    try {
      this.flush()
      return await during()
    } finally {
      this.draining--
    }
  }

  private flush(): void {
    for (const open of this.waiting.splice(0)) open()
    for (const open of this.following) open()
    this.following.clear()
  }
}

/** Run `fn` after `turns` event-loop turns (setImmediate), at once for none. */
function afterTurns(turns: number, fn: () => void): void {
  if (turns <= 0) fn()
  else setImmediate(() => afterTurns(turns - 1, fn))
}
