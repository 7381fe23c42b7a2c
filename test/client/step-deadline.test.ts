import { describe, expect, it } from 'vitest'
import { stepDeadline } from '../../client/session/step-transport.js'

/*
 * Issue 31 (the canary-chat flake): a step deadline must not blame a peer for the client's own
 * stall. A client that built its canary set at once held its event loop for tens of seconds with
 * a real step in flight; AbortSignal.timeout fired on the first turn after, before the waiting
 * answer was read, and the failover banned an honest peer (NoRouteError under load). Ordering
 * only, no timed assertion: what matters is whether the deadline had fired by the first turns after
 * the stall.
 */

/** Holds the event loop for `ms`, as a synchronous canary build does. */
function holdLoop(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // busy: nothing else runs
  }
}

/** Lets every timer and I/O callback that is due run (a few full turns of the loop). */
async function turns(n = 2): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setTimeout(r, 0))
}

describe('step deadlines count the client’s live time', () => {
  it('a plain timeout fires right after a stall longer than it (the old behaviour the flake came from)', async () => {
    const plain = AbortSignal.timeout(1_000)
    holdLoop(1_500)
    await turns()
    expect(plain.aborted).toBe(true)
  })

  it('a step deadline does not fire on the first turns after the stall, and still fires later', async () => {
    // the same stall and deadline: at most STALL_TICK_MS + STALL_GRACE_MS of it count
    const deadline = stepDeadline(1_000)
    holdLoop(1_500)
    await turns()
    expect(deadline.aborted).toBe(false)
    // the peer still gets no more than its time: the deadline fires without another stall
    await new Promise<void>((resolve) => deadline.addEventListener('abort', () => resolve(), { once: true }))
    expect(deadline.aborted).toBe(true)
    expect((deadline.reason as DOMException).name).toBe('TimeoutError')
  })

  it('fires with no stall, and follows the caller’s signal', async () => {
    const quiet = stepDeadline(50)
    await new Promise<void>((resolve) => quiet.addEventListener('abort', () => resolve(), { once: true }))
    expect((quiet.reason as DOMException).name).toBe('TimeoutError')
    const caller = new AbortController()
    const followed = stepDeadline(60_000, { signal: caller.signal })
    caller.abort(new Error('stopped'))
    expect(followed.aborted).toBe(true)
    expect((followed.reason as Error).message).toBe('stopped')
    expect(stepDeadline(60_000, { signal: AbortSignal.abort('early') }).reason).toBe('early')
  })
})
