/**
 * /layerswarm/kv-move/1.0.0 messages (issue #41): KvMoveRequest (a client's KvPush to the source,
 * or a source's KvTransfer frames to the destination) and KvMoveResponse (a KvReceipt or an
 * error). Decoding scans before it parses (wire-scan.ts) and checks every field, as every codec.
 */
import { MalformedMessageError } from './errors.js'
import { arrayField, bytesField, safeUint64, spanFields, stringField, uint32Field } from './field-checks.js'
import { KV_GRANT_ID_BYTES, type KvGrant, type KvReceipt } from './kv-grant.js'
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  MAX_CONTROL_BYTES,
  MAX_IMPORT_SNAPSHOTS,
  MAX_LAYERS,
  MAX_MODEL_ID_LENGTH,
  MAX_PEER_ID_LENGTH,
  MAX_SESSION_ID_LENGTH
} from './limits.js'
import { decodeWire, encodeWire, errorReplyFromWire, errorReplyToWire, oneofBody } from './messages.js'
import { schema, type wire } from './schema.js'
import type { ErrorReply } from './types.js'

/** Chunks one push may name (each sealed on its own, ~4 MiB each): 4 GiB of KV. */
export const MAX_KV_PUSH_CHUNKS = 1024

export interface KvPush {
  readonly grant: KvGrant
  readonly wrappedKey: Uint8Array
  readonly firstSequence: number
  readonly chunkEnds: readonly number[]
  readonly chunkPrefixHashes: readonly Uint8Array[]
}

export interface KvTransfer {
  /** The first frame of a stream only. */
  readonly grant?: KvGrant
  readonly wrappedKey?: Uint8Array
  readonly snapshots: readonly Uint8Array[]
  readonly prefixHash: Uint8Array
}

export type KvMoveRequest = { type: 'push'; push: KvPush } | { type: 'transfer'; transfer: KvTransfer }
export type KvMoveResponse = { type: 'receipt'; receipt: KvReceipt } | { type: 'error'; error: ErrorReply }

const id = { max: MAX_PEER_ID_LENGTH, token: true }
const sid = { max: MAX_SESSION_ID_LENGTH, token: true }

function grantFromWire(w: wire.KvGrant.$Properties, f: string): KvGrant {
  const { start, end } = spanFields(w.start, w.end, `${f}.span`, MAX_LAYERS)
  const fromPosition = uint32Field(w.fromPosition, `${f}.from_position`)
  const toPosition = uint32Field(w.toPosition, `${f}.to_position`)
  if (toPosition <= fromPosition) throw new MalformedMessageError(`${f}: empty range [${fromPosition}, ${toPosition})`)
  return {
    grantId: bytesField(w.grantId, `${f}.grant_id`, [KV_GRANT_ID_BYTES]),
    clientPeerId: stringField(w.clientPeerId, `${f}.client_peer_id`, id),
    sourcePeerId: stringField(w.sourcePeerId, `${f}.source_peer_id`, id),
    destinationPeerId: stringField(w.destinationPeerId, `${f}.destination_peer_id`, id),
    modelId: stringField(w.modelId, `${f}.model_id`, { max: MAX_MODEL_ID_LENGTH, token: true }),
    sourceSessionId: stringField(w.sourceSessionId, `${f}.source_session_id`, sid),
    destinationSessionId: stringField(w.destinationSessionId, `${f}.destination_session_id`, sid),
    start,
    end,
    fromPosition,
    toPosition,
    prefixHash: bytesField(w.prefixHash, `${f}.prefix_hash`, [32]),
    expiresAtMs: safeUint64(w.expiresAtMs, `${f}.expires_at_ms`),
    wrappedKeyHash: bytesField(w.wrappedKeyHash, `${f}.wrapped_key_hash`, [32]),
    signature: bytesField(w.signature, `${f}.signature`, [64])
  }
}

function receiptFromWire(w: wire.KvReceipt.$Properties): KvReceipt {
  return {
    grantId: bytesField(w.grantId, 'kv_receipt.grant_id', [KV_GRANT_ID_BYTES]),
    destinationPeerId: stringField(w.destinationPeerId, 'kv_receipt.destination_peer_id', id),
    destinationSessionId: stringField(w.destinationSessionId, 'kv_receipt.destination_session_id', sid),
    length: uint32Field(w.length, 'kv_receipt.length'),
    sequence: uint32Field(w.sequence, 'kv_receipt.sequence'),
    bytes: safeUint64(w.bytes, 'kv_receipt.bytes'),
    signature: bytesField(w.signature, 'kv_receipt.signature', [64])
  }
}

function requestFromWire(w: wire.KvMoveRequest): KvMoveRequest {
  const body = oneofBody(w, ['push', 'transfer'] as const, 'kv_move_request')
  if (body === 'push') {
    const p = w.push!
    if (p.grant == null) throw new MalformedMessageError('kv_push: no grant')
    const chunkEnds = arrayField(p.chunkEnds, 'kv_push.chunk_ends', MAX_KV_PUSH_CHUNKS).map((e) =>
      uint32Field(e, 'kv_push.chunk_ends')
    )
    const hashes = arrayField(p.chunkPrefixHashes, 'kv_push.chunk_prefix_hashes', MAX_KV_PUSH_CHUNKS).map((h) =>
      bytesField(h, 'kv_push.chunk_prefix_hashes', [32])
    )
    if (chunkEnds.length === 0 || hashes.length !== chunkEnds.length)
      throw new MalformedMessageError('kv_push: one prefix hash per chunk end, at least one chunk')
    return {
      type: 'push',
      push: {
        grant: grantFromWire(p.grant, 'kv_push.grant'),
        wrappedKey: bytesField(p.wrappedKey, 'kv_push.wrapped_key'),
        firstSequence: uint32Field(p.firstSequence, 'kv_push.first_sequence'),
        chunkEnds,
        chunkPrefixHashes: hashes
      }
    }
  }
  if (body === 'transfer') {
    const t = w.transfer!
    const snapshots = arrayField(t.snapshots, 'kv_transfer.snapshots', MAX_IMPORT_SNAPSHOTS).map((s) =>
      bytesField(s, 'kv_transfer.snapshots')
    )
    // the first frame may carry the grant alone (it is read under the control cap)
    if (snapshots.length === 0 && t.grant == null) throw new MalformedMessageError('kv_transfer: no snapshot')
    return {
      type: 'transfer',
      transfer: {
        ...(t.grant != null ? { grant: grantFromWire(t.grant, 'kv_transfer.grant') } : {}),
        ...(t.wrappedKey?.length ? { wrappedKey: bytesField(t.wrappedKey, 'kv_transfer.wrapped_key') } : {}),
        snapshots,
        prefixHash: bytesField(t.prefixHash, 'kv_transfer.prefix_hash', [32])
      }
    }
  }
  throw new MalformedMessageError('kv_move_request: no body')
}

function grantToWire(g: KvGrant): wire.KvGrant.$Properties {
  return { ...g }
}

export function encodeKvMoveRequest(r: KvMoveRequest): Uint8Array {
  const w: wire.KvMoveRequest.$Properties =
    r.type === 'push'
      ? {
          push: {
            ...r.push,
            grant: grantToWire(r.push.grant),
            chunkEnds: [...r.push.chunkEnds],
            chunkPrefixHashes: [...r.push.chunkPrefixHashes]
          }
        }
      : {
          transfer: {
            ...(r.transfer.grant ? { grant: grantToWire(r.transfer.grant) } : {}),
            ...(r.transfer.wrappedKey ? { wrappedKey: r.transfer.wrappedKey } : {}),
            snapshots: [...r.transfer.snapshots],
            prefixHash: r.transfer.prefixHash
          }
        }
  return encodeWire(schema.KvMoveRequest, w)
}

/** A push is a control message (MAX_CONTROL_BYTES); a transfer frame is capped by the caller. */
export function decodeKvMoveRequest(bytes: Uint8Array, maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): KvMoveRequest {
  const w = decodeWire(schema.KvMoveRequest, bytes, {
    maxMessageBytes,
    maxBodyBytes: (body) => (body === 'push' ? MAX_CONTROL_BYTES : maxMessageBytes)
  })
  return requestFromWire(w)
}

export function encodeKvMoveResponse(r: KvMoveResponse): Uint8Array {
  return encodeWire(
    schema.KvMoveResponse,
    r.type === 'receipt' ? { receipt: { ...r.receipt } } : { error: errorReplyToWire(r.error) }
  )
}

export function decodeKvMoveResponse(bytes: Uint8Array): KvMoveResponse {
  const w = decodeWire(schema.KvMoveResponse, bytes, { maxMessageBytes: MAX_CONTROL_BYTES })
  const body = oneofBody(w, ['receipt', 'error'] as const, 'kv_move_response')
  if (body === 'receipt') return { type: 'receipt', receipt: receiptFromWire(w.receipt!) }
  if (body === 'error') return { type: 'error', error: errorReplyFromWire(w.error!) }
  throw new MalformedMessageError('kv_move_response: no body')
}
