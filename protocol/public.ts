/**
 * `layerswarm/protocol`: the wire, for a peer or client written against layerswarm's protocols:
 * protocol ids, validating codecs of every message, framing, and the typed errors a reply carries.
 * The schema is protocol/layerswarm.proto (shipped in the package; `protoPath()`); its generated
 * code is protocol/generated/. The folder's full API (`protocol/index.ts`) is internal; this list
 * is the package's promise (docs/api.md, issue 36).
 *
 * @packageDocumentation
 * @example
 * ```ts
 * import { decodeSessionRequest, encodeSessionRequest, encodeTensor } from 'layerswarm/protocol'
 *
 * const hidden = encodeTensor(new Float32Array(288), [1, 288], 'f16')
 * const bytes = encodeSessionRequest({
 *   requestId: 1,
 *   type: 'step',
 *   step: { sessionId: 's1', stepId: 1, startPosition: 0, hidden, chain: false }
 * })
 * const back = decodeSessionRequest(bytes) // validated field by field; bad input throws a coded error
 * ```
 */
import './polyfills.js'

// The list: protocol ids; the schema's path; the validating codecs; framing; the message types;
// the reply codes and the error classes they map to.
export {
  ANNOUNCE_TOPIC,
  ANNOUNCEMENTS_PROTOCOL,
  type Announcement,
  createMessageChannel,
  type DecodeOptions,
  type DType,
  decodeAnnouncement,
  decodeInfoRequest,
  decodeInfoResponse,
  decodeSessionRequest,
  decodeSessionResponse,
  decodeSignedAnnouncement,
  decodeTensor,
  ErrorCode,
  type ErrorCodeName,
  type ErrorReply,
  encodeAnnouncement,
  encodeInfoRequest,
  encodeInfoResponse,
  encodeSessionRequest,
  encodeSessionResponse,
  encodeSignedAnnouncement,
  encodeTensor,
  errorCodeOf,
  INFO_PROTOCOL,
  type InfoRequest,
  type InfoResponse,
  MalformedMessageError,
  type MessageChannel,
  type MessageChannelInit,
  MessageTooLargeError,
  type OpenSession,
  PROTOCOL_VERSION,
  ProtocolError,
  protoPath,
  type Receipt,
  RemoteError,
  SESSION_PROTOCOL,
  type SessionRequest,
  type SessionResponse,
  type SignedAnnouncement,
  type Step,
  type StepResult,
  type Tensor
} from './index.js'
