/**
 * Busy polling (`layerswarm node start --busy-poll <ms>`): after a session request, keep this
 * process's event loop spinning for a while instead of sleeping in epoll, so the next step of
 * the session (one token later) is read the moment it arrives.
 *
 * Why: in a pipeline only one peer computes at a time; the others sleep until their step comes.
 * A sleeping process wakes slowly on a virtual machine (the idle vCPU halts, and its caches are
 * cold after the other peers streamed their weights), and every hop of every token pays it.
 * The price is one core at 100% while polling — free on a dedicated machine, but on a machine
 * whose cores the computing peer needs (several peers on one host) it steals their compute.
 * Off (0) by default; README "Swarm speed" has the measurements.
 */
export interface BusyPoller {
  /** Keep polling until `ms` after now (no-op when polling is off). */
  touch(): void
  /** Stop polling now (the process is shutting down). */
  stop(): void
  /** True while the loop polls. */
  readonly active: boolean
  /** Milliseconds spent polling so far (logged when the node stops). */
  readonly polledMs: number
}

export function createBusyPoller(windowMs: number): BusyPoller {
  let until = 0
  let running = false
  let stopped = false
  let polledMs = 0
  let startedAt = 0
  // setImmediate keeps libuv's poll phase at timeout 0: socket reads are handled as soon as the
  // kernel has them, and the rest of the loop (timers, I/O callbacks) still runs every turn.
  const spin = (): void => {
    if (!stopped && performance.now() < until) {
      setImmediate(spin)
      return
    }
    running = false
    polledMs += performance.now() - startedAt
  }
  return {
    touch() {
      if (windowMs <= 0 || stopped) return
      until = performance.now() + windowMs
      if (running) return
      running = true
      startedAt = performance.now()
      setImmediate(spin)
    },
    stop() {
      stopped = true
    },
    get active() {
      return running
    },
    get polledMs() {
      return polledMs + (running ? performance.now() - startedAt : 0)
    }
  }
}
