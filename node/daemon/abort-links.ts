/**
 * A diagnostic of the node's long-lived signals (issue #17), beside protocol/abort-link.ts but
 * node-only (node:events; the protocol folder is also bundled for browsers).
 */
import { getEventListeners } from 'node:events'

/**
 * What a signal holds on behalf of others: its abort listeners plus the dependants
 * `AbortSignal.any` registered on it (a Node internal set, read by its symbol's description;
 * 0 where Node has none). A long-lived signal's count must come back down after the operations
 * that followed it ended: the node's metrics report it, and the fuzz checks it (a leak check).
 */
export function abortLinks(signal: AbortSignal): number {
  if (!(signal instanceof AbortSignal)) throw new TypeError('abortLinks: an AbortSignal')
  const dependants = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals')
  // Node's own SafeSet, not an instance of this realm's Set: read its size
  const set =
    dependants === undefined ? undefined : (signal as unknown as Record<symbol, { size?: unknown } | undefined>)[dependants]
  return getEventListeners(signal, 'abort').length + (typeof set?.size === 'number' ? set.size : 0)
}
