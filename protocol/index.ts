/**
 * protocol/: the wire layer of layerswarm (docs/protocol.md) — schema, codecs, framing,
 * protocol ids, the shared libp2p host and signed announcements. Imports nothing of ours.
 */
import './polyfills.js'

export * from './abort-link.js'
export * from './announce.js'
export * from './announcement-exchange.js'
export * from './announcement-messages.js'
export {
  type AnnouncementSyncInit,
  announcementSourceOf,
  pullAnnouncements,
  startAnnouncementSync
} from './announcement-sync.js'
export * from './byte-budget.js'
export * from './errors.js'
export { DTYPE_VALUES, dtypeFromName, WIRE_DTYPES } from './field-checks.js'
export * from './framing.js'
export * from './gossip-scoring.js'
export * from './host.js'
export * from './ids.js'
export * from './info.js'
export * from './kv-grant.js'
export * from './kv-move-codec.js'
export * from './limits.js'
export * from './link-delay.js'
export {
  type DecodeOptions,
  decodeInfoRequest,
  decodeInfoResponse,
  decodeTensorMessage,
  type ErrorReplyContext,
  encodeInfoRequest,
  encodeInfoResponse,
  encodeTensorMessage,
  errorFromReply,
  errorReplyFor
} from './messages.js'
export * from './network-policy.js'
export * from './open-proof.js'
export * from './options.js'
export * from './peer-source.js'
export { protoPath } from './proto-path.js'
export {
  RELAY_MAX_RESERVATIONS,
  type Reachability,
  type ReachabilityInit,
  reachabilityOf
} from './reachability.js'
export * from './receipt.js'
export * from './session-caller.js'
export * from './session-request-codec.js'
export * from './session-response-codec.js'
export * from './session-stream.js'
export * from './step-trace.js'
export * from './swarm-key.js'
export * from './tensor-codec.js'
export type * from './types.js'
export * from './weights-messages.js'
export { peekVarintField, REPEATED_LIMITS } from './wire-scan.js'
