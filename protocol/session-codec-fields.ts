/**
 * Field decoders and decode caps shared by the session request and response codecs
 * (session-request-codec.ts, session-response-codec.ts): ids, hop timings, receipts, and the
 * per-body size caps applied before protobufjs builds a message (issue #17).
 */
import { ProtocolError } from './errors.js'
import { bytesField, finiteField, spanFields, stringField } from './field-checks.js'
import { DEFAULT_MAX_MESSAGE_BYTES, MAX_CONTROL_BYTES, MAX_LAYERS, MAX_PEER_ID_LENGTH, MAX_SESSION_ID_LENGTH } from './limits.js'
import { type DecodeOptions, decodeWire } from './messages.js'
import type { WireMessageType, wire } from './schema.js'
import type { HopTiming, Receipt } from './types.js'
import { peekVarintField } from './wire-scan.js'

export function sessionId(value: unknown, field: string): string {
  return stringField(value, field, { max: MAX_SESSION_ID_LENGTH, token: true })
}

export function peerId(value: unknown, field: string): string {
  return stringField(value, field, { max: MAX_PEER_ID_LENGTH, token: true })
}

export function timingFromWire(w: wire.HopTiming.$Properties, field: string): HopTiming {
  return { peerId: peerId(w.peerId, `${field}.peer_id`), computeMs: finiteField(w.computeMs, `${field}.compute_ms`) }
}

export function receiptFromWire(w: wire.Receipt.$Properties, field: string): Receipt {
  const span = spanFields(w.start, w.end, field, MAX_LAYERS)
  return {
    peerId: peerId(w.peerId, `${field}.peer_id`),
    start: span.start,
    end: span.end,
    inputHash: bytesField(w.inputHash, `${field}.input_hash`, [32]),
    outputHash: bytesField(w.outputHash, `${field}.output_hash`, [32]),
    signature: bytesField(w.signature, `${field}.signature`, [64])
  }
}

/** Bodies whose size is bounded by their tensor or snapshot; every other body is a control message. */
const BULK_BODIES = new Set(['step', 'importKv', 'result', 'snapshot'])

/** Without a caller's caps: control bodies MAX_CONTROL_BYTES, bulk ones the frame cap. */
function bodyCaps(options: DecodeOptions): DecodeOptions {
  const frame = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
  const given = options.maxBodyBytes
  return {
    ...options,
    maxBodyBytes: (body, sessionId) =>
      given !== undefined ? given(body, sessionId) : BULK_BODIES.has(body) ? frame : MAX_CONTROL_BYTES
  }
}

/** Decodes a wire message, attaching the request id (peeked without decoding) to a refusal. */
export function decodeIdentified<P, D>(type: WireMessageType<P, D>, bytes: Uint8Array, options: DecodeOptions): D {
  try {
    return decodeWire(type, bytes, bodyCaps(options))
  } catch (err) {
    const requestId = bytes instanceof Uint8Array ? peekVarintField(bytes, 1) : undefined
    if (requestId !== undefined && requestId > 0 && Number.isSafeInteger(requestId) && err instanceof ProtocolError) {
      err.requestId = requestId
    }
    throw err
  }
}
