/**
 * Typed protocol errors. Every condition has its own class whose `code` is an ErrorCode
 * name from layerswarm.proto, so a handler can turn any failure into an ErrorReply
 * (`errorCodeOf`) and a caller can turn an ErrorReply back into an error (`errorFromReply`).
 */

/**
 * A session id the peer does not hold, and a session grown past its KV cache: conditions of the
 * engine (shards/errors.ts, codes UNKNOWN_SESSION and OUT_OF_CACHE), which the node also raises and
 * the wire carries. One class each, defined by the engine, which imports nothing of ours; the
 * protocol re-exports them from that leaf file (not shards/index.ts, which loads the engine).
 */
export { OutOfCacheError, UnknownSessionError } from '../shards/errors.js'

/** Wire values of `enum ErrorCode` in layerswarm.proto (keep in sync). */
export const ErrorCode = {
  UNKNOWN: 0,
  MALFORMED: 1,
  TOO_LARGE: 2,
  UNKNOWN_SESSION: 3,
  BAD_POSITION: 4,
  BAD_SHAPE: 5,
  BAD_SPAN: 6,
  WRONG_MODEL: 7,
  BUSY: 8,
  OUT_OF_CACHE: 9,
  INTERNAL: 10,
  NEXT_HOP_FAILED: 11,
  UNAUTHORIZED: 12,
  TIMEOUT: 13,
  DUPLICATE_SESSION: 14,
  BAD_HOP_KEY: 20,
  PROOF_REQUIRED: 21,
  SNAPSHOT_TAMPERED: 30,
  SNAPSHOT_MISBOUND: 31,
  SNAPSHOT_REPLAY: 32,
  SNAPSHOT_ORDER: 33,
  KEY_NOT_FOR_US: 34,
  KEY_UNWRAP: 35,
  LEAVING: 36,
  UNSUPPORTED_DTYPE: 40,
  WRONG_DTYPE: 41,
  KV_GRANT_MISSING: 260,
  KV_GRANT_EXPIRED: 261,
  KV_GRANT_REPLAYED: 262,
  KV_GRANT_FOREIGN: 263,
  KV_GRANT_WRONG_SPAN: 264,
  KV_GRANT_FORGED: 265,
  KV_SOURCE_LIMITED: 266
} as const

export type ErrorCodeName = keyof typeof ErrorCode

const CODE_NAMES = new Map<number, ErrorCodeName>(
  (Object.entries(ErrorCode) as Array<[ErrorCodeName, number]>).map(([name, value]) => [value, name])
)

export function isErrorCodeName(value: unknown): value is ErrorCodeName {
  return typeof value === 'string' && Object.hasOwn(ErrorCode, value)
}

/**
 * Wire number -> name. Codes added by newer peers are read as UNKNOWN rather than
 * rejected, so an old client still surfaces the failure.
 */
export function errorCodeName(value: number): ErrorCodeName {
  return CODE_NAMES.get(value) ?? 'UNKNOWN'
}

/** Base class. `requestId` is set when the failing request's id was already known. */
export class ProtocolError extends Error {
  readonly code: ErrorCodeName = 'UNKNOWN'
  requestId?: number
  stepId?: number

  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}

/** A message that does not parse or breaks a field rule (code MALFORMED). */
export class MalformedMessageError extends ProtocolError {
  override readonly code = 'MALFORMED'
}

/** A frame or tensor larger than the configured cap; raised before the frame is buffered. */
export class MessageTooLargeError extends ProtocolError {
  override readonly code = 'TOO_LARGE'
}

/** NaN or ±Inf in an activation, or a value outside the range of the wire dtype. */
export class NonFiniteTensorError extends ProtocolError {
  override readonly code = 'MALFORMED'
}

/** OpenSession asked for a wire dtype the peer does not accept (not in its announced wire_dtypes). */
export class UnsupportedDtypeError extends ProtocolError {
  override readonly code = 'UNSUPPORTED_DTYPE'
}

/** A step's tensor is not in the wire dtype negotiated when its session was opened. */
export class WrongDtypeError extends ProtocolError {
  override readonly code = 'WRONG_DTYPE'
}

export class BadPositionError extends ProtocolError {
  override readonly code = 'BAD_POSITION'
}

export class BadShapeError extends ProtocolError {
  override readonly code = 'BAD_SHAPE'
}

export class BadSpanError extends ProtocolError {
  override readonly code = 'BAD_SPAN'
}

export class WrongModelError extends ProtocolError {
  override readonly code = 'WRONG_MODEL'
}

/** An open without the proof of work the node's load asks for (protocol/open-proof.ts, issue #39): solve and retry. */
export class ProofRequiredError extends ProtocolError {
  override readonly code = 'PROOF_REQUIRED'
}

/** Over the peer's session, KV or queue caps: route elsewhere (docs/design.md §3, docs/protocol.md "Error codes"). */
export class BusyError extends ProtocolError {
  override readonly code = 'BUSY'
}

export class InternalError extends ProtocolError {
  override readonly code = 'INTERNAL'
}

/** Chained mode: a later hop failed or could not be reached. Also raised when a stream dies. */
export class NextHopFailedError extends ProtocolError {
  override readonly code = 'NEXT_HOP_FAILED'
}

export class UnauthorizedError extends ProtocolError {
  override readonly code = 'UNAUTHORIZED'
}

/** Issue #41: KV moved node to node refused at the destination (protocol/kv-grant.ts): one code each. */
export class KvGrantMissingError extends ProtocolError {
  override readonly code = 'KV_GRANT_MISSING'
}
export class KvGrantExpiredError extends ProtocolError {
  override readonly code = 'KV_GRANT_EXPIRED'
}
export class KvGrantReplayedError extends ProtocolError {
  override readonly code = 'KV_GRANT_REPLAYED'
}
export class KvGrantForeignError extends ProtocolError {
  override readonly code = 'KV_GRANT_FOREIGN'
}
export class KvGrantWrongSpanError extends ProtocolError {
  override readonly code = 'KV_GRANT_WRONG_SPAN'
}
export class KvGrantForgedError extends ProtocolError {
  override readonly code = 'KV_GRANT_FORGED'
}
export class KvSourceLimitedError extends ProtocolError {
  override readonly code = 'KV_SOURCE_LIMITED'
}

export class RequestTimeoutError extends ProtocolError {
  override readonly code = 'TIMEOUT'
}

/** The owner already has a session of this id here. */
export class DuplicateSessionError extends ProtocolError {
  override readonly code = 'DUPLICATE_SESSION'
}

/** The peer is leaving (SIGTERM): it runs no more steps, but still exports and closes sessions. */
export class LeavingError extends ProtocolError {
  override readonly code = 'LEAVING'
}

/** An announcement whose signature does not verify under its embedded key. */
export class InvalidSignatureError extends ProtocolError {
  override readonly code = 'UNAUTHORIZED'
}

/** An announcement whose embedded key does not derive the peer id it claims. */
export class PeerIdMismatchError extends ProtocolError {
  override readonly code = 'UNAUTHORIZED'
}

/** An announcement past its expiry, issued in the future, or with too long a lifetime. */
export class AnnouncementExpiredError extends ProtocolError {
  override readonly code = 'UNAUTHORIZED'
}

/** A failure reported by a remote peer in an ErrorReply. */
export class RemoteError extends ProtocolError {
  override readonly code: ErrorCodeName
  /** The hop that failed (in chained mode possibly a later hop than the one we called). */
  readonly peerId: string

  constructor(code: ErrorCodeName, message: string, peerId: string, stepId?: number, requestId?: number) {
    super(`${code} from ${peerId === '' ? 'remote peer' : peerId}: ${message}`)
    this.code = code
    this.peerId = peerId
    if (stepId !== undefined && stepId !== 0) this.stepId = stepId
    if (requestId !== undefined) this.requestId = requestId
  }
}

/**
 * Names of errors thrown by libraries we use (libp2p streams, AbortSignal), which carry no code
 * of ours. Our own folders throw errors whose `code` is already an ErrorCode name.
 */
const LIBRARY_ERROR_NAMES: Record<string, ErrorCodeName> = {
  AbortError: 'TIMEOUT',
  TimeoutError: 'TIMEOUT',
  StreamBufferError: 'TOO_LARGE',
  InvalidDataLengthError: 'TOO_LARGE',
  InvalidDataLengthLengthError: 'TOO_LARGE'
}

/**
 * Maps any thrown value to the ErrorCode to put in a reply: a `code` that is an ErrorCode name
 * (every folder's errors use the wire names for conditions that travel: shards' OUT_OF_CACHE,
 * crypto's SNAPSHOT_REPLAY...) is kept; a library error maps by name; anything else is INTERNAL,
 * since it is a failure of ours and not of the request.
 */
export function errorCodeOf(err: unknown): ErrorCodeName {
  if (err instanceof ProtocolError) return err.code
  if (err == null || typeof err !== 'object') return 'INTERNAL'
  const { code, name } = err as { code?: unknown; name?: unknown }
  if (isErrorCodeName(code)) return code
  if (typeof name === 'string') {
    const mapped = LIBRARY_ERROR_NAMES[name]
    if (mapped !== undefined) return mapped
  }
  return 'INTERNAL'
}

/** A link delay for WAN benchmarks (link-delay.ts) out of range: a local setting, not a wire code. */
export class InvalidLinkDelayError extends Error {
  readonly code = 'INVALID_LINK_DELAY'
  constructor(message: string) {
    super(message)
    this.name = 'InvalidLinkDelayError'
  }
}

/** layerswarm.proto is neither beside this module nor in protocol/ above it: a broken install. */
export class ProtoFileNotFoundError extends Error {
  readonly code = 'PROTO_FILE_NOT_FOUND'
  constructor(message: string) {
    super(message)
    this.name = 'ProtoFileNotFoundError'
  }
}

/** createAnnouncer / subscribeAnnouncements given a host without the pubsub service: a local setting, not a wire code. */
export class PubsubMissingError extends Error {
  readonly code = 'PUBSUB_MISSING'
  constructor(message: string) {
    super(message)
    this.name = 'PubsubMissingError'
  }
}

/** A swarm key file that is not a libp2p v1 pre-shared key (`/key/swarm/psk/1.0.0/`, `/base16/`, 64 hex digits): a local setting. */
export class InvalidSwarmKeyError extends Error {
  readonly code = 'INVALID_SWARM_KEY'
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'InvalidSwarmKeyError'
  }
}

/**
 * A connection refused by the private-swarm check (issue #38): the other side holds another
 * swarm key or none, so it is not a member of this swarm. Raised on both sides of the connection.
 */
export class SwarmKeyMismatchError extends Error {
  readonly code = 'SWARM_KEY_MISMATCH'
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'SwarmKeyMismatchError'
  }
}

/** A peer id outside this node's allow-lists (`--allow-serve`, `--allow-use`) tried to connect or was dialled (issue #38). */
export class PeerNotAllowedError extends Error {
  readonly code = 'PEER_NOT_ALLOWED'
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'PeerNotAllowedError'
  }
}
