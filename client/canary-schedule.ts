import type { Random } from '../canary/index.js'

/*
 * When decoy steps go out (issue #39, item 4). Decoy steps used to launch right after the real
 * step that drew them, so at a hop the gap before a decoy step was a few milliseconds and the gap
 * after it a whole token's time, while a real step had a token's time on both sides: "within 10 ms
 * of the previous step is a decoy" labelled 75-81 % of steps correctly. Now a decoy step drawn
 * after real step k waits until it is open (a new decoy's sessions first) and for the next real
 * step, and goes out beside it, planned by `planBeside`:
 *  - it leads (goes before the real step, which waits for it) or follows, probability 1/2 each;
 *  - its distance from the real step is drawn from one jitter distribution whichever side it is
 *    on (uniform over [MIN_OFFSET_MS, MAX_OFFSET_MS]).
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
/** Nearest a decoy step goes to its real step: one timer tick, so a leader reaches the hop first. */
export const MIN_OFFSET_MS = 1
/** Farthest a decoy step goes from its real step (also the most a real step waits for leaders). */
export const MAX_OFFSET_MS = 4

/** Where one decoy step goes: before or after the real step it goes beside, and how far from it. */
export interface BesidePlan {
  readonly lead: boolean
  readonly offsetMs: number
}

/** The plan of one decoy step (seeded: a test replays it with no clock). */
export function planBeside(random: Random): BesidePlan {
  const lead = random.next() < LEAD_SHARE
  return { lead, offsetMs: MIN_OFFSET_MS + random.next() * (MAX_OFFSET_MS - MIN_OFFSET_MS) }
}

/**
 * The planned send times (ms) of real steps at `realAtMs` and the decoy steps beside them, with
 * `decoysBeside[k]` decoy steps beside real step k: what a hop would see if the network added
 * nothing. Leaders shift their real step (and the steps after it) by the wait they ask.
 */
export function plannedTimeline(
  random: Random,
  realAtMs: readonly number[],
  decoysBeside: readonly number[]
): Array<{ atMs: number; real: boolean }> {
  const out: Array<{ atMs: number; real: boolean }> = []
  let delayMs = 0
  realAtMs.forEach((t, k) => {
    const plans = Array.from({ length: decoysBeside[k] ?? 0 }, () => planBeside(random))
    const waitMs = Math.max(0, ...plans.filter((p) => p.lead).map((p) => p.offsetMs))
    const at = t + delayMs + waitMs
    delayMs += waitMs
    out.push({ atMs: at, real: true })
    for (const p of plans) out.push({ atMs: p.lead ? at - p.offsetMs : at + p.offsetMs, real: false })
  })
  return out.sort((a, b) => a.atMs - b.atMs)
}

/** Gates of decoy steps: each opens beside the next real step (as planned) or at the session's end. */
export class DecoySchedule {
  private waiting: Array<() => void> = []
  /** Drains under way (drain): decoy steps drawn meanwhile go at once. */
  private draining = 0
  /** Followers of a real step, waiting for their offset, and their timers. */
  private readonly following = new Map<() => void, ReturnType<typeof setTimeout>>()

  constructor(private readonly random: Random) {}

  /** The gate of one decoy step drawn now: it goes out beside the next real step. */
  gate(): Promise<void> {
    if (this.draining > 0) return Promise.resolve()
    return new Promise<void>((open) => this.waiting.push(open))
  }

  /**
   * A real step is about to go out (the caller sends it once this resolves): each waiting decoy
   * step is planned; leaders go their offset before it (the real step waits the largest offset),
   * followers their offset after.
   */
  async beforeStep(): Promise<void> {
    const planned = this.waiting.splice(0).map((open) => ({ open, ...planBeside(this.random) }))
    const waitMs = Math.max(0, ...planned.filter((p) => p.lead).map((p) => p.offsetMs))
    for (const p of planned) {
      const afterMs = p.lead ? waitMs - p.offsetMs : waitMs + p.offsetMs
      const timer = setTimeout(() => {
        this.following.delete(p.open)
        p.open()
      }, afterMs)
      this.following.set(p.open, timer)
    }
    if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs))
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
    for (const [open, timer] of this.following) {
      clearTimeout(timer)
      open()
    }
    this.following.clear()
  }
}
