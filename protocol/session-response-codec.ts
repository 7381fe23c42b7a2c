/**
 * The SessionResponse codec of /layerswarm/session/1.0.0 (docs/design.md §2, docs/protocol.md): a client decodes
 * every reply with the same field checks and caps a node applies to requests (issue #17), and
 * a refused reply carries its request id.
 */
import { encodeSnapshotResponse } from './bulk-codec.js'
import { MalformedMessageError } from './errors.js'
import { arrayField, bytesField, checkUint64, safeUint64, uint32Field, withRequestId } from './field-checks.js'
import { sealedHeadFromWire } from './head-request-codec.js'
import { MAX_AWAITED_STEPS, MAX_SESSION_LENGTH, MAX_TIMINGS } from './limits.js'
import {
  type DecodeOptions,
  encodeWire,
  errorReplyFromWire,
  errorReplyToWire,
  oneofBody,
  tensorFromWire,
  tensorToWire
} from './messages.js'
import { schema, type wire } from './schema.js'
import { decodeIdentified, receiptFromWire, sessionId, timingFromWire } from './session-codec-fields.js'
import type { SessionResponse, StepResult } from './types.js'

const RESPONSE_BODIES = ['opened', 'result', 'results', 'rewound', 'closed', 'error', 'snapshot', 'imported'] as const

function resultFromWire(w: wire.StepResult.$Properties, maxElements?: number): StepResult {
  const timings = arrayField(w.timings, 'result.timings', MAX_TIMINGS)
  const receipts = arrayField(w.receipts, 'result.receipts', MAX_TIMINGS)
  return {
    sessionId: sessionId(w.sessionId, 'result.session_id'),
    stepId: safeUint64(w.stepId, 'result.step_id'),
    ...(w.hidden != null ? { hidden: tensorFromWire(w.hidden, 'result.hidden', maxElements) } : {}),
    timings: timings.map((t, i) => timingFromWire(t, `result.timings[${i}]`)),
    receipts: receipts.map((r, i) => receiptFromWire(r, `result.receipts[${i}]`)),
    ...sealedHeadFromWire(w.sealedHead)
  }
}

function resultToWire(r: StepResult): wire.StepResult.$Properties {
  return { ...r, stepId: checkUint64(r.stepId, 'result.step_id'), hidden: r.hidden ? tensorToWire(r.hidden) : undefined }
}

function responseFromWire(w: wire.SessionResponse.$Properties, maxElements?: number): SessionResponse {
  const requestId = safeUint64(w.requestId, 'request_id')
  return withRequestId(requestId, (): SessionResponse => {
    const body = oneofBody(w, RESPONSE_BODIES, 'SessionResponse')
    switch (body) {
      case 'opened':
        return {
          requestId,
          type: 'opened',
          opened: {
            sessionId: sessionId(w.opened!.sessionId, 'opened.session_id'),
            ...(w.opened!.chainedSessionIds === true ? { chainedSessionIds: true } : {})
          }
        }
      case 'result':
        return { requestId, type: 'result', result: resultFromWire(w.result!, maxElements) }
      case 'results': {
        const results = arrayField(w.results!.results, 'results.results', MAX_AWAITED_STEPS)
        return { requestId, type: 'results', results: results.map((r) => resultFromWire(r, maxElements)) }
      }
      case 'rewound':
        return {
          requestId,
          type: 'rewound',
          rewound: {
            sessionId: sessionId(w.rewound!.sessionId, 'rewound.session_id'),
            length: uint32Field(w.rewound!.length, 'rewound.length', 0, MAX_SESSION_LENGTH)
          }
        }
      case 'closed':
        return { requestId, type: 'closed', closed: { sessionId: sessionId(w.closed!.sessionId, 'closed.session_id') } }
      case 'error':
        return { requestId, type: 'error', error: errorReplyFromWire(w.error!) }
      case 'snapshot':
        return {
          requestId,
          type: 'snapshot',
          snapshot: {
            sessionId: sessionId(w.snapshot!.sessionId, 'snapshot.session_id'),
            snapshot: bytesField(w.snapshot!.snapshot, 'snapshot.snapshot')
          }
        }
      case 'imported':
        return {
          requestId,
          type: 'imported',
          imported: {
            sessionId: sessionId(w.imported!.sessionId, 'imported.session_id'),
            length: uint32Field(w.imported!.length, 'imported.length', 0, MAX_SESSION_LENGTH)
          }
        }
      default:
        throw new MalformedMessageError('SessionResponse: missing or unsupported body')
    }
  })
}

function responseToWire(res: SessionResponse): wire.SessionResponse.$Properties & { requestId: number } {
  const requestId = checkUint64(res.requestId, 'request_id')
  switch (res.type) {
    case 'opened':
      return { requestId, opened: res.opened }
    case 'result':
      return { requestId, result: resultToWire(res.result) }
    case 'results':
      return { requestId, results: { results: res.results.map(resultToWire) } }
    case 'rewound':
      return { requestId, rewound: res.rewound }
    case 'closed':
      return { requestId, closed: res.closed }
    case 'snapshot':
      return { requestId, snapshot: res.snapshot }
    case 'imported':
      return { requestId, imported: res.imported }
    case 'error':
      return { requestId, error: errorReplyToWire(res.error) }
    default:
      throw new MalformedMessageError(`unknown response type ${(res as { type: string }).type}`)
  }
}

/** Encodes one response of a session stream, after the same checks decodeSessionResponse runs. */
export function encodeSessionResponse(res: SessionResponse): Uint8Array {
  const wire = responseToWire(res)
  responseFromWire(wire)
  if (res.type === 'snapshot') return encodeSnapshotResponse(wire.requestId, res.snapshot)
  return encodeWire(schema.SessionResponse, wire)
}

/** Decodes a session response: the allocation-free scan, the generated decoder, then every field check. */
export function decodeSessionResponse(bytes: Uint8Array, options: DecodeOptions = {}): SessionResponse {
  return responseFromWire(decodeIdentified(schema.SessionResponse, bytes, options), options.maxTensorElements)
}
