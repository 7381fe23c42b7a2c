/**
 * The SessionRequest codec of /layerswarm/session/1.0.0 (docs/design.md §2, docs/protocol.md). Decoding validates
 * each field and, once request_id is known, attaches it to the thrown error so the handler can
 * answer that request with a typed ErrorReply instead of dropping the stream.
 *
 * These checks are context-free (sizes, ranges, enums); checks against the session (span
 * served, dim, positions, max length) belong to the handler, which can use
 * decodeTensor(t, { shape: [undefined, dim] }) and the typed errors in errors.ts.
 */
import { encodeImportKvRequest } from './bulk-codec.js'
import { MalformedMessageError } from './errors.js'
import {
  arrayField,
  bytesField,
  checkUint64,
  dtypeFromWire,
  dtypeToWire,
  safeUint64,
  spanFields,
  stringField,
  uint32Field,
  withRequestId
} from './field-checks.js'
import { headFromWire } from './head-request-codec.js'
import {
  MAX_ADDR_LENGTH,
  MAX_ADDRS,
  MAX_AWAITED_STEPS,
  MAX_HOP_AUTH,
  MAX_IMPORT_SNAPSHOTS,
  MAX_LAYERS,
  MAX_MODEL_ID_LENGTH,
  MAX_NEXT_HOPS,
  MAX_SESSION_LENGTH,
  MAX_TIMINGS
} from './limits.js'
import { type DecodeOptions, encodeWire, oneofBody, tensorFromWire, tensorToWire } from './messages.js'
import { schema, type wire } from './schema.js'
import { decodeIdentified, peerId, receiptFromWire, sessionId, timingFromWire } from './session-codec-fields.js'
import type { ExportKv, ImportKv, NextHop, OpenSession, SessionRequest, Step } from './types.js'

const REQUEST_BODIES = ['open', 'step', 'rewind', 'close', 'awaitResult', 'awaitResults', 'exportKv', 'importKv'] as const

function nextHopFromWire(w: wire.NextHop.$Properties, field: string): NextHop {
  const span = spanFields(w.start, w.end, field, MAX_LAYERS)
  const addrs = arrayField(w.addrs, `${field}.addrs`, MAX_ADDRS)
  return {
    peerId: peerId(w.peerId, `${field}.peer_id`),
    addrs: addrs.map((a, i) => stringField(a, `${field}.addrs[${i}]`, { max: MAX_ADDR_LENGTH, token: true })),
    start: span.start,
    end: span.end,
    ...(w.sessionId ? { sessionId: sessionId(w.sessionId, `${field}.session_id`) } : {})
  }
}

function openFromWire(w: wire.OpenSession.$Properties): OpenSession {
  const span = spanFields(w.start, w.end, 'open', MAX_LAYERS)
  const hops = arrayField(w.nextHops, 'open.next_hops', MAX_NEXT_HOPS)
  return {
    sessionId: sessionId(w.sessionId, 'open.session_id'),
    modelId: stringField(w.modelId, 'open.model_id', { max: MAX_MODEL_ID_LENGTH, token: true }),
    start: span.start,
    end: span.end,
    maxLength: uint32Field(w.maxLength, 'open.max_length', 1, MAX_SESSION_LENGTH),
    wireDtype: dtypeFromWire(w.wireDtype, 'open.wire_dtype'),
    nextHops: hops.map((h, i) => nextHopFromWire(h, `open.next_hops[${i}]`)),
    ...(w.upstreamPeerId ? { upstreamPeerId: peerId(w.upstreamPeerId, 'open.upstream_peer_id') } : {}),
    ...(w.upstreamSessionId ? { upstreamSessionId: sessionId(w.upstreamSessionId, 'open.upstream_session_id') } : {}),
    ...optionalBytes('clientX25519PublicKey', bytesField(w.clientX25519PublicKey, 'open.client_x25519_public_key', [0, 32])),
    ...optionalBytes('wrappedSnapshotKey', bytesField(w.wrappedSnapshotKey, 'open.wrapped_snapshot_key', [0, 61])),
    ...(w.proofEpoch || w.proofNonce
      ? {
          proofEpoch: uint32Field(w.proofEpoch ?? 0, 'open.proof_epoch'),
          proofNonce: uint32Field(w.proofNonce ?? 0, 'open.proof_nonce')
        }
      : {})
  }
}

/** Absent and empty bytes fields decode the same: leave them out of the decoded object. */
function optionalBytes<K extends string>(key: K, bytes: Uint8Array): { [P in K]?: Uint8Array } {
  return (bytes.length > 0 ? { [key]: bytes } : {}) as { [P in K]?: Uint8Array }
}

function exportFromWire(w: wire.ExportKv.$Properties): ExportKv {
  const from = uint32Field(w.from, 'export_kv.from', 0, MAX_SESSION_LENGTH)
  const to = uint32Field(w.to, 'export_kv.to', 0, MAX_SESSION_LENGTH)
  if (from > to) throw new MalformedMessageError('export_kv: from > to')
  const delta = w.delta === true
  if (!delta && from !== 0) throw new MalformedMessageError('export_kv: a full snapshot starts at 0')
  return {
    sessionId: sessionId(w.sessionId, 'export_kv.session_id'),
    from,
    to,
    sequence: safeUint64(w.sequence, 'export_kv.sequence'),
    prefixHash: bytesField(w.prefixHash, 'export_kv.prefix_hash', [32]),
    delta
  }
}

function importFromWire(w: wire.ImportKv.$Properties): ImportKv {
  const snapshots = arrayField(w.snapshots, 'import_kv.snapshots', MAX_IMPORT_SNAPSHOTS)
  if (snapshots.length === 0) throw new MalformedMessageError('import_kv.snapshots: none')
  return {
    sessionId: sessionId(w.sessionId, 'import_kv.session_id'),
    wrappedKey: bytesField(w.wrappedKey, 'import_kv.wrapped_key'),
    snapshots: snapshots.map((b, i) => bytesField(b, `import_kv.snapshots[${i}]`)),
    snapshotSessionId: sessionId(w.snapshotSessionId, 'import_kv.snapshot_session_id'),
    prefixHash: bytesField(w.prefixHash, 'import_kv.prefix_hash', [32]),
    ...(w.append === true ? { append: true } : {})
  }
}

function stepFromWire(w: wire.Step.$Properties, maxElements?: number): Step {
  return {
    sessionId: sessionId(w.sessionId, 'step.session_id'),
    stepId: safeUint64(w.stepId, 'step.step_id'),
    startPosition: uint32Field(w.startPosition, 'step.start_position', 0, MAX_SESSION_LENGTH),
    hidden: tensorFromWire(w.hidden, 'step.hidden', maxElements),
    chain: w.chain === true,
    ...hopAuthFromWire(w.hopAuth),
    ...oneWayFromWire(w),
    ...headFromWire(w.head)
  }
}

/** Chained one-way fields: set only when one_way is (absent and empty decode the same). */
function oneWayFromWire(w: wire.Step.$Properties): Pick<Step, 'oneWay' | 'timings' | 'receipts'> {
  const timings = arrayField(w.timings, 'step.timings', MAX_TIMINGS)
  const receipts = arrayField(w.receipts, 'step.receipts', MAX_TIMINGS)
  if (w.oneWay !== true) {
    if (timings.length > 0) throw new MalformedMessageError('step.timings need step.one_way')
    if (receipts.length === 0) return {}
    // a two-way chained step carries the receipts of the hops before the receiver too: they bind
    // the client's input hash its step tag names (issue #17)
    if (w.chain !== true) throw new MalformedMessageError('step.receipts need step.chain')
    return { receipts: receipts.map((r, i) => receiptFromWire(r, `step.receipts[${i}]`)) }
  }
  if (w.chain !== true) throw new MalformedMessageError('step.one_way needs step.chain')
  return {
    oneWay: true,
    timings: timings.map((t, i) => timingFromWire(t, `step.timings[${i}]`)),
    receipts: receipts.map((r, i) => receiptFromWire(r, `step.receipts[${i}]`))
  }
}

function hopAuthFromWire(value: unknown): { hopAuth?: Uint8Array[] } {
  const tags = arrayField(value, 'step.hop_auth', MAX_HOP_AUTH)
  return tags.length > 0 ? { hopAuth: tags.map((t, i) => bytesField(t, `step.hop_auth[${i}]`, [32])) } : {}
}

function requestFromWire(w: wire.SessionRequest.$Properties, maxElements?: number): SessionRequest {
  const requestId = safeUint64(w.requestId, 'request_id')
  return withRequestId(requestId, (): SessionRequest => {
    if (requestId === 0) throw new MalformedMessageError('request_id must be >= 1')
    const body = oneofBody(w, REQUEST_BODIES, 'SessionRequest')
    switch (body) {
      case 'open':
        return { requestId, type: 'open', open: openFromWire(w.open!) }
      case 'step': {
        const step = withStepId(w.step!, () => stepFromWire(w.step!, maxElements))
        return { requestId, type: 'step', step }
      }
      case 'rewind':
        return {
          requestId,
          type: 'rewind',
          rewind: {
            sessionId: sessionId(w.rewind!.sessionId, 'rewind.session_id'),
            length: uint32Field(w.rewind!.length, 'rewind.length', 0, MAX_SESSION_LENGTH)
          }
        }
      case 'close':
        return { requestId, type: 'close', close: { sessionId: sessionId(w.close!.sessionId, 'close.session_id') } }
      case 'awaitResult':
        return {
          requestId,
          type: 'await',
          await: {
            sessionId: sessionId(w.awaitResult!.sessionId, 'await_result.session_id'),
            stepId: safeUint64(w.awaitResult!.stepId, 'await_result.step_id')
          }
        }
      case 'awaitResults': {
        const ids = arrayField(w.awaitResults!.stepIds, 'await_results.step_ids', MAX_AWAITED_STEPS)
        if (ids.length === 0) throw new MalformedMessageError('await_results.step_ids is empty')
        return {
          requestId,
          type: 'awaitResults',
          awaitResults: {
            sessionId: sessionId(w.awaitResults!.sessionId, 'await_results.session_id'),
            stepIds: ids.map((id, i) => safeUint64(id, `await_results.step_ids[${i}]`))
          }
        }
      }
      case 'exportKv':
        return { requestId, type: 'exportKv', exportKv: exportFromWire(w.exportKv!) }
      case 'importKv':
        return { requestId, type: 'importKv', importKv: importFromWire(w.importKv!) }
      default:
        throw new MalformedMessageError('SessionRequest: missing or unsupported body')
    }
  })
}

/** Attaches the step id (when it parses) to errors from a step's other fields. */
function withStepId<T>(w: wire.Step.$Properties, fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    try {
      const id = safeUint64(w.stepId, 'step_id')
      if (err != null && typeof err === 'object' && 'code' in err) (err as { stepId?: number }).stepId = id
    } catch {}
    throw err
  }
}

function stepToWire(s: Step): wire.Step.$Properties {
  return { ...s, stepId: checkUint64(s.stepId, 'step.step_id'), hidden: tensorToWire(s.hidden) }
}

function requestToWire(req: SessionRequest): wire.SessionRequest.$Properties & { requestId: number } {
  const requestId = checkUint64(req.requestId, 'request_id')
  switch (req.type) {
    case 'open':
      return { requestId, open: { ...req.open, wireDtype: dtypeToWire(req.open.wireDtype, 'open.wire_dtype') } }
    case 'step':
      return { requestId, step: stepToWire(req.step) }
    case 'rewind':
      return { requestId, rewind: req.rewind }
    case 'close':
      return { requestId, close: req.close }
    case 'await':
      return { requestId, awaitResult: { ...req.await, stepId: checkUint64(req.await.stepId, 'await_result.step_id') } }
    case 'awaitResults':
      return {
        requestId,
        awaitResults: {
          sessionId: req.awaitResults.sessionId,
          stepIds: req.awaitResults.stepIds.map((id, i) => checkUint64(id, `await_results.step_ids[${i}]`))
        }
      }
    case 'exportKv':
      return { requestId, exportKv: { ...req.exportKv, sequence: checkUint64(req.exportKv.sequence, 'export_kv.sequence') } }
    case 'importKv':
      return { requestId, importKv: req.importKv }
    default:
      throw new MalformedMessageError(`unknown request type ${(req as { type: string }).type}`)
  }
}

/**
 * Encodes one request of a session stream, after the same checks decodeSessionRequest runs.
 *
 * @example
 * ```ts
 * const bytes = encodeSessionRequest({ requestId: 1, type: 'close', close: { sessionId: 's1' } })
 * decodeSessionRequest(bytes) // { requestId: 1, type: 'close', close: { sessionId: 's1' } }
 * ```
 */
export function encodeSessionRequest(req: SessionRequest): Uint8Array {
  const wire = requestToWire(req)
  requestFromWire(wire)
  // snapshots are megabytes: one exact-size buffer instead of protobufjs's copies (bulk-codec.ts)
  if (req.type === 'importKv') return encodeImportKvRequest(wire.requestId, req.importKv)
  return encodeWire(schema.SessionRequest, wire)
}

/** Decodes a session request: the allocation-free scan, the generated decoder, then every field check. */
export function decodeSessionRequest(bytes: Uint8Array, options: DecodeOptions = {}): SessionRequest {
  return requestFromWire(decodeIdentified(schema.SessionRequest, bytes, options), options.maxTensorElements)
}
