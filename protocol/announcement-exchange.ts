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
  MAX_ANNOUNCEMENTS_RESPONSE_BYTES
} from './announcement-messages.js'
import type { AnnouncementStore } from './announcement-store.js'
import { MalformedMessageError } from './errors.js'
import { createMessageChannel, request } from './framing.js'
import type { Host } from './host.js'
import { ANNOUNCEMENTS_PROTOCOL, REQUEST_STREAM_LIMITS } from './ids.js'
import type { Announcement, SignedAnnouncement } from './types.js'

export { type AnnouncementSource, AnnouncementStore, type AnnouncementStoreOptions } from './announcement-store.js'

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
