import type { Random } from '../../canary/index.js'

/*
 * Decoy steps in slots of their own (issue #39, item 4, at the default rate). Beside real steps
 * (canary-schedule.ts) decoys hide only where about one goes beside every real step: at the
 * default rate (0.03, 0.1 while a new client's peers are in their burst) most real steps stand
 * alone, a token's time from any other step, while every decoy step has a real step a few turns
 * away, so "a step with no neighbour is real" labelled 0.64-0.83 of steps right (bench collusion).
 * Here a decoy step takes a step's place in the client's rhythm instead: drawn after real step k,
 * it goes out when real step k + 1 is ready (when k + 1 would have gone), and k + 1 goes one
 * interval later, the interval drawn from the client's own intervals between consecutive real
 * steps (send to send: the route, the client's head, sampling and bookkeeping). A hop sees the
 * steps one interval of the real ones apart, real or decoy: the decoy leads the real step behind
 * it and follows the one before. Tried first: waiting for the decoy's answer and then a pause
 * drawn from the client's (chained timing 0.68), or an interval but never before the answer
 * (0.76-0.81): a decoy step's round trip on the loaded test host was 0.2-1.1 s against 40-60 ms
 * for a real one, so any wait on it set decoys apart. The price is an interval per decoy step on
 * the critical path (about the rate: 3 % at the default base rate, more during a new client's burst).
 */

/** How decoy steps are paced against real steps (client/verification/decoy-launcher.ts). */
export interface DecoyPacer {
  /** The gate of one decoy step: it resolves when the step may go. */
  gate(): Promise<void>
  /** A real step of `sessionId` is about to go out (the caller sends it once this resolves). */
  beforeStep(sessionId?: string): Promise<void>
  /** While `during` runs no real step may follow: waiting decoy steps go without one. */
  drain<T>(during: () => Promise<T>): Promise<T>
}

/** The clock slots are paced by (a test gives a virtual one). */
export interface SlotClock {
  now(): number
  sleep(ms: number): Promise<void>
}

const wallClock: SlotClock = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms))
}

/** Intervals between real steps kept to draw from (the latest: the pace drifts with load). */
export const INTERVALS_KEPT = 32
/** Decoy steps wait for this many intervals between real steps (a new client's first steps). */
export const MIN_INTERVALS = 8
/** Decoy slots before one real step, at most (the rest wait for the next). */
export const SLOTS_PER_STEP = 4
/** A slot's interval is at most this many times the median of those kept (drawInterval). */
export const TAIL_CAP = 3
/** An interval longer than this is the client idle between requests, not its pace: not kept. */
export const MAX_INTERVAL_MS = 2000

/** Decoy steps one at a time in the real steps' rhythm (above). */
export class DecoySlots implements DecoyPacer {
  private waiting: Array<() => void> = []
  private draining = 0
  /** Slots go one after another: the last one queued. */
  private chain: Promise<void> = Promise.resolve()
  /** When the last real step went, and its session. */
  private lastRealAtMs: number | undefined
  private lastSession: string | undefined
  private readonly intervalsMs: number[] = []

  constructor(
    private readonly random: Random,
    private readonly clock: SlotClock = wallClock
  ) {}

  gate(): Promise<void> {
    return new Promise<void>((open) => {
      if (this.draining > 0) this.queue(open)
      else this.waiting.push(open)
    })
  }

  async beforeStep(sessionId?: string): Promise<void> {
    // the client's own pace: from the last real step of this session going out to this one being
    // ready (decoy slots between them come after that, so every real step gives one); between
    // sessions the client settles and prefills, no pace a decoy step should take
    const readyAtMs = this.clock.now()
    const intervalMs = readyAtMs - (this.lastRealAtMs ?? Number.NEGATIVE_INFINITY)
    if (this.lastSession === sessionId && intervalMs <= MAX_INTERVAL_MS) {
      this.intervalsMs.push(intervalMs)
      if (this.intervalsMs.length > INTERVALS_KEPT) this.intervalsMs.shift()
    }
    // until the client's pace is known, decoy steps wait (a slot's interval is drawn from it)
    // and SLOTS_PER_STEP before one real step at most (the lanes of a new client's burst: its
    // peers are checked in as many real steps as before slots; one per step spread the burst and
    // delayed convictions fourfold in real steps)
    if (this.intervalsMs.length >= MIN_INTERVALS) for (const open of this.waiting.splice(0, SLOTS_PER_STEP)) this.queue(open)
    await this.chain
    this.lastRealAtMs = this.clock.now()
    this.lastSession = sessionId
  }

  async drain<T>(during: () => Promise<T>): Promise<T> {
    this.draining++
    try {
      for (const open of this.waiting.splice(0)) this.queue(open)
      return await during()
    } finally {
      this.draining--
    }
  }

  /**
   * One of the kept intervals, at most TAIL_CAP × their median: a decoy step draws from a few dozen
   * intervals, so a rare slow one (a client's first steps while its canaries build: 1.5 s against
   * 45 ms) would come back many times in a burst of decoy steps where the real steps had it once.
   */
  private drawInterval(): number {
    const n = this.intervalsMs.length
    if (n === 0) return 0
    const median = [...this.intervalsMs].sort((a, b) => a - b)[Math.floor(n / 2)]
    return Math.min(this.intervalsMs[this.random.int(n)], TAIL_CAP * median)
  }

  /**
   * One decoy step's slot after those queued: it goes now and the next step an interval later,
   * whether or not its answer is back (a decoy step's round trip is no real step's: the first
   * slots waited for it, and the gap after a decoy step read 0.2-1.1 s against 40-60 ms after a
   * real one on the loaded test host, chained timing 0.76-0.81).
   */
  private queue(open: () => void): void {
    this.chain = this.chain.then(async () => {
      const sentAtMs = this.clock.now()
      open()
      const intervalMs = this.drawInterval()
      const leftMs = sentAtMs + intervalMs - this.clock.now()
      if (leftMs > 0) await this.clock.sleep(leftMs)
    })
  }
}
/**
 * The pacing for a base rate: slots below one decoy step per two real steps, where decoys beside
 * real steps would leave most real steps alone (above); beside them from there (cheaper: the
 * decoy's compute runs while the real step's does), where nearly every real step has one.
 */
export const BESIDE_FROM_RATE = 0.5
