import type { Random } from '../canary/index.js'

/*
 * When decoy steps go out (issue #39, item 4). Decoy steps used to launch right after the real
 * step that drew them, so at a hop the gap before a decoy step was a few milliseconds and the gap
 * after it a whole token's time, while a real step had a token's time on both sides: "within 10 ms
 * of the previous step is a decoy" labelled 75-81 % of steps correctly. Now a decoy step drawn
 * after real step k waits until it is open (a new decoy's sessions first) and for the next real
 * step, and goes out beside it: just before it (it leads) or just after it (it follows), each
 * with probability 1/2. A hop then sees decoy steps in the clusters real steps are in, and within
 * a cluster the first step is real or decoy alike, and so is the last: a decoy step leads (a long
 * gap before it, a short one after) as often as it follows, and so does the real step beside it.
 * Of all the lead shares 1/2 is the one that leaves both gaps, before and after, least telling
 * (a share s that matched the gap before, s = 1/(1+r) for r decoy steps per real step, made the
 * gap after tell more). What stays is the real steps no decoy step is beside: a token's time on
 * both sides. Their share is what the decoy rate leaves (1 - r); docs/verification.md ("Decoys
 * two colluding peers cannot tell apart") has the accuracies measured by `bench collusion`.
 */

/** How long a real step waits for the decoy steps leading it to be on their way (one timer tick). */
export const LEAD_HEAD_START_MS = 1

/** The share of decoy steps that go out just before the real step they go beside. */
export const LEAD_SHARE = 0.5

interface Waiting {
  readonly open: () => void
}

/** Gates of decoy steps: each opens at the next real step (leading or following it) or at the session's end. */
export class DecoySchedule {
  private waiting: Waiting[] = []
  /** Drains under way (drain): decoy steps drawn meanwhile go at once. */
  private draining = 0
  /** Followers of the real step going out now, until their turn comes. */
  private readonly following = new Set<() => void>()

  constructor(private readonly random: Random) {}

  /** The gate of one decoy step drawn now: it goes out beside the next real step. */
  gate(): Promise<void> {
    if (this.draining > 0) return Promise.resolve()
    return new Promise<void>((open) => this.waiting.push({ open }))
  }

  /**
   * A real step is about to go out: the decoy steps that lead it go now, the ones that follow it
   * once it is on its way (setImmediate: after the real step's own writes, before the client's
   * checks of the step before it, which run once it is sent and would hold a follower back by
   * milliseconds in chained mode).
   */
  async beforeStep(): Promise<void> {
    let leading = 0
    const following: Array<() => void> = []
    for (const w of this.waiting.splice(0)) {
      if (this.random.next() < LEAD_SHARE) {
        w.open()
        leading++
      } else {
        following.push(w.open)
        this.following.add(w.open)
      }
    }
    // A leading step must reach the hop first: a hop reads a request that came while it computed
    // only after that compute, so one sent just behind the real step lands after it there.
    if (leading > 0) await new Promise((r) => setTimeout(r, LEAD_HEAD_START_MS))
    // the caller sends the real step as soon as this returns; followers come right behind it
    setImmediate(() => {
      for (const open of following) if (this.following.delete(open)) open()
    })
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
    for (const w of this.waiting.splice(0)) w.open()
    // followers go now too: their probes wait on them
    for (const open of this.following) open()
    this.following.clear()
  }
}
