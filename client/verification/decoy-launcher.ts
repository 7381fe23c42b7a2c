import { CanariesPendingError, type PeerVerdict, type Random } from '../../canary/index.js'
import { errorCode } from '../../shards/index.js'
import { DecoySchedule } from './canary-schedule.js'
import { BESIDE_FROM_RATE, type DecoyPacer, DecoySlots } from './decoy-slots.js'

/** A decoy step's gate: it resolves when the step may go. */
export type DecoyGate = () => Promise<void>

/**
 * Decoy steps in slots of their own below BESIDE_FROM_RATE, beside real steps from it (issue #39:
 * decoy-slots.ts says why; the choice follows the base rate, so one client's decoys all look alike).
 */
export function pacerFor(baseRate: number, random: Random): DecoyPacer {
  return baseRate >= BESIDE_FROM_RATE ? new DecoySchedule(random) : new DecoySlots(random)
}

/** What the launcher asks of its monitor (client/verification/canary-monitor.ts). */
export interface DecoyLauncherDeps {
  /** A peer convicted (by drift or by replayed receipts): no new decoy step opens on it. */
  isOut(peerId: string): boolean
  log?: (e: Record<string, unknown>) => void
}

/**
 * Decoy steps in flight, one per decoy at most, released beside real steps by the seeded
 * schedule (client/verification/canary-schedule.ts, issue #39: decoys must not leak by timing).
 */
export class DecoyLauncher {
  /** The step in flight per decoy (lane) key. */
  readonly inflight = new Map<string, Promise<void>>()
  /** Decoys whose next step waits behind the one in flight (launch). */
  private readonly queued = new Set<string>()

  constructor(
    private readonly schedule: DecoyPacer,
    private readonly deps: DecoyLauncherDeps
  ) {}

  /** A real step is about to go out: the decoy steps drawn since the last one go beside it. */
  beforeStep(sessionId?: string): Promise<void> {
    return this.schedule.beforeStep(sessionId)
  }

  /** No real step follows for the decoy steps waiting to go out beside one: they go now, then `rest`. */
  drain(rest: () => Promise<void>): Promise<void> {
    return this.schedule.drain(rest)
  }

  /**
   * At most one canary step in flight per decoy: the next waits, as a real session's steps do.
   * A scheduled step gets its gate (it opens beside the next real step); others go at once.
   */
  launch(key: string, run: (gate: DecoyGate) => Promise<PeerVerdict[]>, scheduled = true, peers: readonly string[] = []): void {
    const prev = this.inflight.get(key)
    // A scheduled step may wait behind the one in flight (one at most): it goes beside a later
    // real step, so a decoy can step with every real step as a real session does (issue #39).
    if (prev && (!scheduled || this.queued.has(key))) return
    const gate = scheduled ? () => this.schedule.gate() : () => Promise.resolve()
    const start = (): Promise<PeerVerdict[]> => {
      this.queued.delete(key)
      // a step queued behind one that convicted a peer of its route does not open a new decoy there
      if (peers.some((p) => this.deps.isOut(p))) return Promise.resolve([])
      return run(gate)
    }
    if (prev) this.queued.add(key)
    const p: Promise<void> = (prev ? prev.then(start) : start())
      // the verdicts' convictions are noted where they were scored (canary-scores.ts)
      .then(() => undefined)
      // A hop that fails a canary step is the real path's to report; note it and go on. No
      // canary for a peer while its new ones are built is no fault (canary-trace-store.ts).
      .catch((err: Error) => {
        if (err instanceof CanariesPendingError) return
        this.deps.log?.({ event: 'canary-error', key, code: errorCode(err), message: err.message })
      })
      .finally(() => {
        if (this.inflight.get(key) === p) this.inflight.delete(key)
      })
    this.inflight.set(key, p)
  }
}
