/**
 * Codecs for the info protocol, tensors and error replies. Each decodeX validates every
 * field (docs/protocol.md: every decode validates shapes and ranges) and each encodeX runs
 * the same checks on what we send, so we never emit what we would refuse.
 *
 * Pattern: TS object -> wire object (enum numbers) -> xFromWire (the validator, shared
 * with decoding) -> protobufjs encode. Decoded byte fields view the received frame.
 */
import {
  ErrorCode,
  type ErrorCodeName,
  errorCodeName,
  errorCodeOf,
  MalformedMessageError,
  MessageTooLargeError,
  ProtocolError,
  RemoteError
} from './errors.js'
import {
  arrayField,
  bytesField,
  checkUint64,
  dtypeFromWire,
  dtypeListFromWire,
  dtypeToWire,
  finiteField,
  hardwareFields,
  kvDtypeField,
  queuedStepsField,
  safeUint64,
  spanFields,
  stringField,
  uint32Field
} from './field-checks.js'
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_INFO_REQUEST_BYTES,
  MAX_INFO_RESPONSE_BYTES,
  MAX_LAYERS,
  MAX_MODEL_ID_LENGTH,
  MAX_OPEN_PROOF_BITS,
  MAX_PEER_ID_LENGTH,
  MAX_SESSION_ID_LENGTH,
  MAX_TENSOR_ELEMENTS,
  MAX_TENSOR_RANK,
  MAX_VERSION_LENGTH,
  MAX_WIRE_DTYPES
} from './limits.js'
import { modelNameField } from './model-name-field.js'
import { schema, type WireMessageType, type wire } from './schema.js'
import { validateTensor } from './tensor-codec.js'
import type { ErrorReply, InfoRequest, InfoResponse, Tensor } from './types.js'
import { peekStringField, scanMessage, topLevelMember } from './wire-scan.js'

export interface DecodeOptions {
  /** Refuse inputs longer than this before parsing them (default 64 MiB). */
  maxMessageBytes?: number
  /** Largest tensor accepted (default MAX_TENSOR_ELEMENTS). */
  maxTensorElements?: number
  /**
   * The cap for a message whose oneof body is `body` (protobufjs name: step, awaitResult...),
   * given the body's session id when it has one. Checked after the allocation-free scan and
   * before decoding; the session codecs default to MAX_CONTROL_BYTES for control bodies.
   */
  maxBodyBytes?: (body: string, sessionId: string | undefined) => number
}

/**
 * protobufjs decode behind three checks that allocate nothing: the size cap, the scan of
 * tags, lengths and list counts (wire-scan.ts), then the cap of the body the message carries.
 * Any parse failure becomes MALFORMED.
 */
export function decodeWire<P, D>(type: WireMessageType<P, D>, bytes: Uint8Array, options: DecodeOptions = {}): D {
  const max = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
  if (!(bytes instanceof Uint8Array)) throw new MalformedMessageError(`${type.name}: not bytes`)
  if (bytes.byteLength > max) {
    throw new MessageTooLargeError(`${type.name}: ${bytes.byteLength} bytes > ${max}`)
  }
  if (options.maxBodyBytes !== undefined) {
    const body = topLevelMember(type, bytes)
    if (body !== undefined) {
      const sessionId = peekStringField(bytes, body.start, body.end, 1, MAX_SESSION_ID_LENGTH)
      const cap = options.maxBodyBytes(body.name, sessionId)
      if (bytes.byteLength > cap) throw new MessageTooLargeError(`${type.name}.${body.name}: ${bytes.byteLength} bytes > ${cap}`)
    }
  }
  scanMessage(type, bytes)
  try {
    return type.decode(bytes)
  } catch (err) {
    throw new MalformedMessageError(`${type.name}: ${(err as Error).message}`, { cause: err })
  }
}

export function encodeWire<P>(type: WireMessageType<P, unknown>, message: P): Uint8Array {
  return type.encode(message).finish()
}

/** Which member of a oneof is set; refuses messages that set several. */
export function oneofBody<K extends string>(message: { [M in K]?: unknown }, members: readonly K[], what: string): K | undefined {
  let found: K | undefined
  for (const m of members) {
    if (message[m] == null) continue
    if (found !== undefined) throw new MalformedMessageError(`${what}: both ${found} and ${m} are set`)
    found = m
  }
  return found
}

// ---- tensors ----

export function tensorToWire(t: Tensor): wire.Tensor.$Properties {
  return { shape: t.shape, dtype: dtypeToWire(t.dtype, 'tensor.dtype'), data: t.data }
}

export function tensorFromWire(
  w: wire.Tensor.$Properties | null | undefined,
  field: string,
  maxElements = MAX_TENSOR_ELEMENTS
): Tensor {
  if (w == null) throw new MalformedMessageError(`${field}: missing tensor`)
  const shape = arrayField(w.shape, `${field}.shape`, MAX_TENSOR_RANK)
  const t: Tensor = {
    shape: shape.map((d, i) => uint32Field(d, `${field}.shape[${i}]`)),
    dtype: dtypeFromWire(w.dtype, `${field}.dtype`),
    data: bytesField(w.data, `${field}.data`)
  }
  validateTensor(t, maxElements)
  return t
}

export function encodeTensorMessage(t: Tensor): Uint8Array {
  const wire = tensorToWire(t)
  tensorFromWire(wire, 'tensor')
  return encodeWire(schema.Tensor, wire)
}

export function decodeTensorMessage(bytes: Uint8Array, options: DecodeOptions = {}): Tensor {
  return tensorFromWire(decodeWire(schema.Tensor, bytes, options), 'tensor', options.maxTensorElements)
}

// ---- info ----

/** Encodes an info request (it has no fields: the request is the stream itself). */
export function encodeInfoRequest(_req: InfoRequest = {}): Uint8Array {
  return encodeWire(schema.InfoRequest, {})
}

/** Decodes an info request, refusing anything longer than MAX_INFO_REQUEST_BYTES. */
export function decodeInfoRequest(bytes: Uint8Array, options: DecodeOptions = {}): InfoRequest {
  decodeWire(schema.InfoRequest, bytes, { maxMessageBytes: options.maxMessageBytes ?? MAX_INFO_REQUEST_BYTES })
  return {}
}

function infoFromWire(w: wire.InfoResponse.$Properties): InfoResponse {
  const nLayers = uint32Field(w.nLayers, 'n_layers', 1, MAX_LAYERS)
  const span = spanFields(w.start, w.end, 'info', nLayers)
  return {
    modelId: stringField(w.modelId, 'model_id', { max: MAX_MODEL_ID_LENGTH, token: true }),
    version: stringField(w.version, 'version', { max: MAX_VERSION_LENGTH, allowEmpty: true }),
    nLayers,
    dim: uint32Field(w.dim, 'dim', 1),
    start: span.start,
    end: span.end,
    throughput: finiteField(w.throughput, 'throughput'),
    freeCacheTokens: uint32Field(w.freeCacheTokens, 'free_cache_tokens'),
    maxSessions: uint32Field(w.maxSessions, 'max_sessions'),
    activeSessions: uint32Field(w.activeSessions, 'active_sessions'),
    wireDtypes: dtypeListFromWire(w.wireDtypes, 'wire_dtypes', MAX_WIRE_DTYPES),
    x25519PublicKey: bytesField(w.x25519PublicKey, 'x25519_public_key', [0, 32]),
    ...(w.x25519Binding?.length ? { x25519Binding: bytesField(w.x25519Binding, 'x25519_binding', [64]) } : {}),
    ...kvDtypeField(w.kvDtype, 'kv_dtype'),
    ...queuedStepsField(w.queuedSteps, 'queued_steps'),
    ...hardwareFields(w, ''),
    ...modelNameField(w.modelName, 'model_name'),
    ...(w.openProofBits ? { openProofBits: uint32Field(w.openProofBits, 'open_proof_bits', 0, MAX_OPEN_PROOF_BITS) } : {})
  }
}

/** Encodes what a peer serves (model, span, load, keys), refusing what decodeInfoResponse would. */
export function encodeInfoResponse(info: InfoResponse): Uint8Array {
  const wire = { ...info, wireDtypes: info.wireDtypes.map((d) => dtypeToWire(d, 'wire_dtypes')) }
  infoFromWire(wire)
  return encodeWire(schema.InfoResponse, wire)
}

/** Decodes and validates a peer's info response. */
export function decodeInfoResponse(bytes: Uint8Array, options: DecodeOptions = {}): InfoResponse {
  return infoFromWire(decodeWire(schema.InfoResponse, bytes, { maxMessageBytes: MAX_INFO_RESPONSE_BYTES, ...options }))
}

// ---- error replies ----

export function errorReplyToWire(e: ErrorReply): wire.ErrorReply.$Properties {
  const code = ErrorCode[e.code]
  if (code === undefined) throw new MalformedMessageError(`error.code: unknown code ${String(e.code)}`)
  return { code, message: e.message, stepId: checkUint64(e.stepId, 'error.step_id'), peerId: e.peerId }
}

export function errorReplyFromWire(w: wire.ErrorReply.$Properties): ErrorReply {
  return {
    code: errorCodeName(uint32Field(w.code, 'error.code')),
    message: stringField(w.message, 'error.message', { max: MAX_ERROR_MESSAGE_LENGTH, allowEmpty: true }),
    stepId: safeUint64(w.stepId, 'error.step_id'),
    peerId: stringField(w.peerId, 'error.peer_id', { max: MAX_PEER_ID_LENGTH, allowEmpty: true, token: true })
  }
}

export interface ErrorReplyContext {
  /** Our own peer id, reported as the failing hop unless the error names another one. */
  peerId?: string
  stepId?: number
}

/**
 * Builds the ErrorReply for any thrown value: code via errorCodeOf, message truncated to
 * the wire limit. A RemoteError from a later hop keeps that hop's code and peer id, so
 * chained failures reach the client naming the hop that actually failed.
 */
export function errorReplyFor(err: unknown, context: ErrorReplyContext = {}): ErrorReply {
  const code: ErrorCodeName = errorCodeOf(err)
  // Our own bugs are reported by class name only: their messages may carry paths or
  // another session's state, which must not leak to a peer (docs/security.md).
  const internal = code === 'INTERNAL' && !(err instanceof ProtocolError)
  const text = internal
    ? `internal error (${(err as Error)?.name ?? typeof err})`
    : err instanceof Error
      ? err.message
      : String(err)
  const stepId = context.stepId ?? (err as { stepId?: number } | undefined)?.stepId ?? 0
  const peerId = err instanceof RemoteError && err.peerId !== '' ? err.peerId : (context.peerId ?? '')
  return { code, message: text.slice(0, MAX_ERROR_MESSAGE_LENGTH), stepId, peerId }
}

/** Turns a received ErrorReply into a typed RemoteError (code, peerId, stepId). */
export function errorFromReply(reply: ErrorReply, requestId?: number): RemoteError {
  return new RemoteError(reply.code, reply.message, reply.peerId, reply.stepId, requestId)
}
