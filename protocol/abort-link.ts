/**
 * Signals that follow other signals until the caller lets go (issue #17). `AbortSignal.any` would
 * do the same, but in Node 20 every call adds a WeakRef to a set on each source signal that is
 * emptied only when that source aborts: a node's stop signal, which every frame read follows,
 * gained one entry per frame, forever (about 7 MiB of live heap per 100,000 fuzz frames, found
 * with heap snapshots of the fuzzed node). A listener, removed by `clear()`, holds nothing after.
 */
export interface LinkedSignal {
  readonly signal: AbortSignal
  /** Stops following the sources (call when the operation is over, aborted or not). */
  clear(): void
}

/** A signal aborted with the reason of the first of `sources` to abort (undefined entries are skipped). */
export function linkSignals(sources: readonly (AbortSignal | undefined)[], controller = new AbortController()): LinkedSignal {
  if (!Array.isArray(sources)) throw new TypeError('linkSignals: sources must be an array')
  const live = sources.filter((s): s is AbortSignal => s !== undefined)
  const already = live.find((s) => s.aborted)
  if (already !== undefined) {
    controller.abort(already.reason)
    return { signal: controller.signal, clear() {} }
  }
  const listeners = live.map((s) => {
    const onAbort = (): void => {
      clear()
      controller.abort(s.reason)
    }
    s.addEventListener('abort', onAbort, { once: true })
    return () => s.removeEventListener('abort', onAbort)
  })
  const clear = (): void => {
    for (const remove of listeners.splice(0)) remove()
  }
  return { signal: controller.signal, clear }
}
