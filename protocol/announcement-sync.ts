/**
 * Anti-entropy for announcements (issue #19): a node also pulls what its neighbours hold
 * (announcement-exchange.ts), so an announcement gossip did not deliver still arrives:
 * - from a peer that just connected and serves the exchange, once, `intervalMs` after it was
 *   identified (by then it has announced itself);
 * - from one random connected peer every `intervalMs`.
 * Why: a node restarted with its kept identity (node/identity.ts) was not heard over gossip by
 * its bootstrap peer for over 12 s (the peer id's gossipsub state from before the restart), so a
 * client asking that bootstrap peer did not find it; the pull closes that gap. Entries are
 * verified on receipt (signature, signer, expiry): a neighbour can only withhold.
 */
import type { AbortOptions, PeerId } from '@libp2p/interface'
import { linkSignals } from './abort-link.js'
import { type AnnouncementSource, type AnnouncementStore, fetchAnnouncements } from './announcement-exchange.js'
import type { Host } from './host.js'
import { ANNOUNCEMENTS_PROTOCOL } from './ids.js'
import { DEFAULT_ANNOUNCEMENT_PULL_TIMEOUT_MS } from './options.js'
import { peerSource } from './peer-source.js'

/** The source an announcement from `peer` counts against: its id and the IP of its connection. */
export function announcementSourceOf(host: Host, peer: PeerId): AnnouncementSource {
  const conn = host.getConnections(peer)[0]
  return { peer: peer.toString(), ip: conn ? peerSource(conn.remoteAddr.toString())?.ip : undefined }
}

export interface AnnouncementSyncInit {
  /** Pull period and the delay after a peer connects (a node uses its announce interval). */
  intervalMs: number
  /** How long one pull may take (default 5 s). */
  timeoutMs?: number
  signal?: AbortSignal
  onError?(err: Error): void
}

/** One pull from `from`; resolves to how many verified entries it brought. */
export async function pullAnnouncements(
  host: Host,
  store: AnnouncementStore,
  from: PeerId,
  { signal }: AbortOptions = {}
): Promise<number> {
  const got = await fetchAnnouncements(host, from, { signal })
  // counted against `from`'s share of unconfirmed entries (issue #39)
  const source = announcementSourceOf(host, from)
  const now = Date.now()
  for (const { announcement, signed } of got) store.put(announcement, signed, now, source)
  return got.length
}

/** The first pull from a peer just identified (then one after a whole interval). */
export const EARLY_PULL_MS = 1_000

/** Pull soon after connect, again an interval later, and every `intervalMs` until `signal` aborts. */
export function startAnnouncementSync(host: Host, store: AnnouncementStore, init: AnnouncementSyncInit): void {
  if (!Number.isFinite(init.intervalMs) || init.intervalMs <= 0) throw new RangeError('announcement sync: intervalMs > 0')
  if (init.signal?.aborted) return
  const pull = (from: PeerId): void => {
    if (init.signal?.aborted) return
    // a listener on the long-lived init.signal, removed after the pull (AbortSignal.any would keep
    // an entry on it per pull: protocol/abort-link.ts)
    const link = linkSignals([AbortSignal.timeout(init.timeoutMs ?? DEFAULT_ANNOUNCEMENT_PULL_TIMEOUT_MS), init.signal])
    pullAnnouncements(host, store, from, { signal: link.signal })
      .catch((err: Error) => init.onError?.(err))
      .finally(() => link.clear())
  }
  const timers = new Set<ReturnType<typeof setTimeout>>()
  const later = (ms: number, from: PeerId): void => {
    const t = setTimeout(() => {
      timers.delete(t)
      pull(from)
    }, ms)
    t.unref?.()
    timers.add(t)
  }
  const onIdentify = (evt: CustomEvent<{ peerId: PeerId; protocols: string[] }>): void => {
    if (!evt.detail.protocols.includes(ANNOUNCEMENTS_PROTOCOL)) return
    // A node that just started dials its bootstrap peers before it announces, and its first
    // gossip may find no mesh yet: pulled only after a whole interval, it stayed unknown to
    // its bootstrap peer (and so to clients) for seconds, and a client started with it failed
    // with NO_ROUTE (issue #31). Pull soon, and again after the interval.
    const soonMs = Math.min(EARLY_PULL_MS, init.intervalMs)
    if (soonMs < init.intervalMs) later(soonMs, evt.detail.peerId)
    later(init.intervalMs, evt.detail.peerId)
  }
  host.addEventListener('peer:identify', onIdentify)
  const every = setInterval(() => {
    const peers = host.getPeers()
    if (peers.length > 0) pull(peers[Math.floor(Math.random() * peers.length)])
  }, init.intervalMs)
  every.unref?.()
  init.signal?.addEventListener(
    'abort',
    () => {
      clearInterval(every)
      for (const t of timers) clearTimeout(t)
      host.removeEventListener('peer:identify', onIdentify)
    },
    { once: true }
  )
}
