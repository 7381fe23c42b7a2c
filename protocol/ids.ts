/**
 * Protocol ids follow `/layerswarm/<name>/<major>.<minor>.<patch>` (docs/protocol.md).
 * A breaking change to a message bumps the major version of the protocols that carry it;
 * peers negotiate ids with multistream-select, so old and new versions can coexist.
 */

export const PROTOCOL_VERSION = '1.0.0'

/** One InfoRequest, one InfoResponse: what a peer serves, its load and keys. */
export const INFO_PROTOCOL = `/layerswarm/info/${PROTOCOL_VERSION}`

/** One long-lived stream per hop per session: SessionRequest in, SessionResponse out. */
export const SESSION_PROTOCOL = `/layerswarm/session/${PROTOCOL_VERSION}`

/** Sealed KV export/import (docs/design.md §6); messages are added by a later issue. */
export const KV_PROTOCOL = `/layerswarm/kv/${PROTOCOL_VERSION}`

/**
 * KV moved node to node under the client's grant (issue #41): a client's KvPush to the source
 * (one frame, one KvReceipt back), and the source's KvTransfer frames to the destination.
 */
export const KV_MOVE_PROTOCOL = `/layerswarm/kv-move/${PROTOCOL_VERSION}`

/** One AnnouncementsRequest, one AnnouncementsResponse: the signed announcements a peer holds. */
export const ANNOUNCEMENTS_PROTOCOL = `/layerswarm/announcements/${PROTOCOL_VERSION}`

/** gossipsub topic carrying SignedAnnouncement messages (docs/protocol.md "Announcements"). */
export const ANNOUNCE_TOPIC = `/layerswarm/announce/${PROTOCOL_VERSION}`

/**
 * Stream limits for handle()/dialProtocol(). libp2p's defaults (32 inbound, 64 outbound
 * per protocol per connection) would cap a client at 64 concurrent sessions per hop; a
 * session stream lives as long as its session, so the caps are raised. A node's real
 * admission control is its session cap (BUSY), not the stream count.
 */
export const SESSION_STREAM_LIMITS = {
  maxInboundStreams: 1024,
  maxOutboundStreams: 1024,
  // a relayed connection carries a data and a duration limit (protocol/reachability.ts), which
  // makes it "limited" to libp2p: our protocols run on it all the same (issue #39)
  runOnLimitedConnection: true
} as const

/** info and kv streams are short-lived request/response exchanges. */
export const REQUEST_STREAM_LIMITS = { maxInboundStreams: 128, maxOutboundStreams: 128, runOnLimitedConnection: true } as const
