/**
 * /layerswarm/announcements/1.0.0: a peer answers with the signed announcements it holds, so
 * discovery does not rest on gossip alone. A client that joins between two announce rounds,
 * or whose gossipsub mesh has not formed (or whose bootstrap peer scores it down), still
 * learns the swarm from one request to a bootstrap peer. Every entry carries its author's
 * signature (announce.ts), so the responder cannot forge or alter one; it can only withhold.
 */
import type { PeerId } from '@libp2p/interface'
import type { Multiaddr } from '@multiformats/multiaddr'
import { verifyAnnouncement } from './announce.js'
import {
  decodeAnnouncementsRequest,
  decodeAnnouncementsResponse,
  encodeAnnouncementsRequest,
  encodeAnnouncementsResponse,
  MAX_ANNOUNCEMENTS_REQUEST_BYTES,
  MAX_ANNOUNCEMENTS_RESPONSE_BYTES,
  MAX_HELD_ANNOUNCEMENTS
} from './announcement-messages.js'
import { MalformedMessageError } from './errors.js'
import { createMessageChannel, request } from './framing.js'
import type { Host } from './host.js'
import { ANNOUNCEMENTS_PROTOCOL, REQUEST_STREAM_LIMITS } from './ids.js'
import type { Announcement, SignedAnnouncement } from './types.js'

/** The newest verified announcement of each peer, as received (so its signature still checks). */
export class AnnouncementStore {
  private readonly held = new Map<string, { a: Announcement; signed: SignedAnnouncement }>()

  constructor(private readonly max = MAX_HELD_ANNOUNCEMENTS) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError('AnnouncementStore: max must be an integer ≥ 1')
  }

  /** Keep `signed` (already verified as `a`) unless a newer one of the same peer is held. */
  put(a: Announcement, signed: SignedAnnouncement, now = Date.now()): void {
    const prev = this.held.get(a.peerId)
    if (prev && prev.a.issuedAtMs > a.issuedAtMs) return
    this.held.set(a.peerId, { a, signed })
    if (this.held.size > this.max) this.prune(now)
    // still full of live entries: drop the one that expires first
    while (this.held.size > this.max) {
      let first: string | undefined
      let at = Number.POSITIVE_INFINITY
      for (const [id, e] of this.held) if (e.a.expiresAtMs < at) [first, at] = [id, e.a.expiresAtMs]
      if (first === undefined) break
      this.held.delete(first)
    }
  }

  /** Live announcements, for one model or all, newest first. */
  list(modelId?: string, now = Date.now()): SignedAnnouncement[] {
    this.prune(now)
    return [...this.held.values()]
      .filter((e) => modelId === undefined || e.a.modelId === modelId)
      .sort((x, y) => y.a.issuedAtMs - x.a.issuedAtMs)
      .map((e) => e.signed)
  }

  get size(): number {
    return this.held.size
  }

  private prune(now: number): void {
    for (const [id, e] of this.held) if (e.a.expiresAtMs <= now) this.held.delete(id)
  }
}

/**
 * Answer AnnouncementsRequests from `store`. The request and the reply have different caps
 * (1 KiB in, MAX_ANNOUNCEMENTS_RESPONSE_BYTES out), so this is serveRequest() with a channel
 * whose frames may be reply-sized but which buffers at most a request's worth of unread bytes.
 */
export async function serveAnnouncements(
  host: Host,
  store: AnnouncementStore,
  options: { signal?: AbortSignal; onError?(err: Error): void } = {}
): Promise<void> {
  const { signal } = options
  await host.handle(
    ANNOUNCEMENTS_PROTOCOL,
    async (stream) => {
      const channel = createMessageChannel(stream, {
        maxMessageBytes: MAX_ANNOUNCEMENTS_RESPONSE_BYTES,
        maxBufferedBytes: 2 * MAX_ANNOUNCEMENTS_REQUEST_BYTES
      })
      try {
        const req = await channel.read({ signal })
        if (req === undefined) throw new MalformedMessageError('stream closed without a request')
        const { modelId } = decodeAnnouncementsRequest(req)
        await channel.write(encodeAnnouncementsResponse(store.list(modelId)), { signal })
        await channel.close({ signal })
      } catch (err) {
        stream.abort(err as Error)
        options.onError?.(err as Error)
      }
    },
    REQUEST_STREAM_LIMITS
  )
}

export interface FetchAnnouncementsOptions {
  /** Only this model's announcements. */
  modelId?: string
  /** Entries that fail verification (the responder relayed something bad; they are dropped). */
  onInvalid?(err: Error): void
  signal?: AbortSignal
}

/** Ask a peer for the announcements it holds; returns those that verify, with their signed form. */
export async function fetchAnnouncements(
  host: Host,
  target: PeerId | Multiaddr | Multiaddr[],
  options: FetchAnnouncementsOptions = {}
): Promise<Array<{ announcement: Announcement; signed: SignedAnnouncement }>> {
  const reply = await request(host, target, ANNOUNCEMENTS_PROTOCOL, encodeAnnouncementsRequest({ modelId: options.modelId }), {
    signal: options.signal,
    maxMessageBytes: MAX_ANNOUNCEMENTS_RESPONSE_BYTES
  })
  const out: Array<{ announcement: Announcement; signed: SignedAnnouncement }> = []
  for (const signed of decodeAnnouncementsResponse(reply)) {
    try {
      const announcement = await verifyAnnouncement(signed, Date.now(), { signal: options.signal })
      if (options.modelId === undefined || announcement.modelId === options.modelId) out.push({ announcement, signed })
    } catch (err) {
      options.onInvalid?.(err as Error)
    }
  }
  return out
}
