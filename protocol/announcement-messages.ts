/**
 * Codecs for swarm announcements (docs/protocol.md "Announcements"): `{model, span, throughput, free KV
 * tokens, wire dtypes, version}` plus addresses and an expiry, wrapped in a
 * SignedAnnouncement that carries the signer's public key.
 */
import { MalformedMessageError } from './errors.js'
import {
  arrayField,
  bytesField,
  checkUint64,
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
  MAX_ADDR_LENGTH,
  MAX_ADDRS,
  MAX_HELD_ANNOUNCEMENTS,
  MAX_LAYERS,
  MAX_MODEL_ID_LENGTH,
  MAX_PEER_ID_LENGTH,
  MAX_VERSION_LENGTH,
  MAX_WIRE_DTYPES
} from './limits.js'
import { type DecodeOptions, decodeWire, encodeWire } from './messages.js'
import { modelNameField } from './model-name-field.js'
import { schema, type wire } from './schema.js'
import type { Announcement, SignedAnnouncement } from './types.js'

/** Announcements travel over gossipsub, whose default message cap is 1 MiB; ours are tiny. */
export const MAX_ANNOUNCEMENT_BYTES = 16 * 1024

function announcementFromWire(w: wire.Announcement.$Properties): Announcement {
  const span = spanFields(w.start, w.end, 'announcement', MAX_LAYERS)
  const addrs = arrayField(w.addrs, 'announcement.addrs', MAX_ADDRS)
  const issuedAtMs = safeUint64(w.issuedAtMs, 'announcement.issued_at_ms')
  const expiresAtMs = safeUint64(w.expiresAtMs, 'announcement.expires_at_ms')
  if (expiresAtMs <= issuedAtMs) throw new MalformedMessageError('announcement: expires before it was issued')
  return {
    peerId: stringField(w.peerId, 'announcement.peer_id', { max: MAX_PEER_ID_LENGTH, token: true }),
    modelId: stringField(w.modelId, 'announcement.model_id', { max: MAX_MODEL_ID_LENGTH, token: true }),
    start: span.start,
    end: span.end,
    throughput: finiteField(w.throughput, 'announcement.throughput'),
    freeCacheTokens: uint32Field(w.freeCacheTokens, 'announcement.free_cache_tokens'),
    wireDtypes: dtypeListFromWire(w.wireDtypes, 'announcement.wire_dtypes', MAX_WIRE_DTYPES),
    version: stringField(w.version, 'announcement.version', { max: MAX_VERSION_LENGTH, allowEmpty: true }),
    addrs: addrs.map((a, i) => stringField(a, `announcement.addrs[${i}]`, { max: MAX_ADDR_LENGTH, token: true })),
    issuedAtMs,
    expiresAtMs,
    ...(w.x25519PublicKey?.length
      ? { x25519PublicKey: bytesField(w.x25519PublicKey, 'announcement.x25519_public_key', [32]) }
      : {}),
    ...(w.x25519Binding?.length ? { x25519Binding: bytesField(w.x25519Binding, 'announcement.x25519_binding', [64]) } : {}),
    ...kvDtypeField(w.kvDtype, 'announcement.kv_dtype'),
    ...queuedStepsField(w.queuedSteps, 'announcement.queued_steps'),
    ...hardwareFields(w, 'announcement.'),
    ...modelNameField(w.modelName, 'announcement.model_name'),
    ...weightsAnnouncementFields(w)
  }
}

/** Announcement.content_id (lsw1- and 64 hex digits, or absent) and demand_tokens_per_minute (issue 33). */
function weightsAnnouncementFields(w: wire.Announcement.$Properties): { contentId?: string; demandTokensPerMinute?: number } {
  const out: { contentId?: string; demandTokensPerMinute?: number } = {}
  if (w.contentId != null && w.contentId !== '') {
    if (typeof w.contentId !== 'string' || !/^lsw1-[0-9a-f]{64}$/.test(w.contentId))
      throw new MalformedMessageError('announcement.content_id: not a content id (lsw1- and 64 hex digits)')
    out.contentId = w.contentId
  }
  if (w.demandTokensPerMinute != null && w.demandTokensPerMinute !== 0)
    out.demandTokensPerMinute = uint32Field(w.demandTokensPerMinute, 'announcement.demand_tokens_per_minute')
  return out
}

/** Encodes an announcement (the signed payload), refusing what decodeAnnouncement would refuse. */
export function encodeAnnouncement(a: Announcement): Uint8Array {
  const wire = {
    ...a,
    wireDtypes: a.wireDtypes.map((d) => dtypeToWire(d, 'announcement.wire_dtypes')),
    issuedAtMs: checkUint64(a.issuedAtMs, 'announcement.issued_at_ms'),
    expiresAtMs: checkUint64(a.expiresAtMs, 'announcement.expires_at_ms'),
    ...(a.deviceMemoryBytes !== undefined
      ? { deviceMemoryBytes: checkUint64(a.deviceMemoryBytes, 'announcement.device_memory_bytes') }
      : {})
  }
  announcementFromWire(wire)
  return encodeWire(schema.Announcement, wire)
}

/** Decodes and validates an announcement; any bad field throws MalformedMessageError. */
export function decodeAnnouncement(bytes: Uint8Array, options: DecodeOptions = {}): Announcement {
  const max = options.maxMessageBytes ?? MAX_ANNOUNCEMENT_BYTES
  return announcementFromWire(decodeWire(schema.Announcement, bytes, { maxMessageBytes: max }))
}

function signedFromWire(w: wire.SignedAnnouncement.$Properties): SignedAnnouncement {
  const announcement = bytesField(w.announcement, 'signed.announcement')
  const publicKey = bytesField(w.publicKey, 'signed.public_key')
  const signature = bytesField(w.signature, 'signed.signature')
  if (announcement.byteLength === 0) throw new MalformedMessageError('signed.announcement: empty')
  // Ed25519 protobuf keys are 36 bytes; RSA ones reach ~550 (4096-bit). Anything bigger is junk.
  if (publicKey.byteLength === 0 || publicKey.byteLength > 1024) throw new MalformedMessageError('signed.public_key: bad length')
  if (signature.byteLength === 0 || signature.byteLength > 1024) throw new MalformedMessageError('signed.signature: bad length')
  return { announcement, publicKey, signature }
}

/** Encodes an announcement with its signer's public key and signature (the gossip payload). */
export function encodeSignedAnnouncement(s: SignedAnnouncement): Uint8Array {
  signedFromWire(s)
  return encodeWire(schema.SignedAnnouncement, s)
}

/** Decodes a signed announcement's envelope; the caller checks the signature (protocol/announce.ts). */
export function decodeSignedAnnouncement(bytes: Uint8Array, options: DecodeOptions = {}): SignedAnnouncement {
  const max = options.maxMessageBytes ?? MAX_ANNOUNCEMENT_BYTES
  return signedFromWire(decodeWire(schema.SignedAnnouncement, bytes, { maxMessageBytes: max }))
}

/** An AnnouncementsRequest carries one short model id: nothing bigger is read. */
export const MAX_ANNOUNCEMENTS_REQUEST_BYTES = 1024

/**
 * Cap of an AnnouncementsResponse. A responder holds at most MAX_HELD_ANNOUNCEMENTS and trims
 * its reply to this size; a requester refuses a longer frame before buffering it.
 */
export const MAX_ANNOUNCEMENTS_RESPONSE_BYTES = 512 * 1024

/** Announcements one peer keeps for others to ask for (one per peer id, the newest); limits.ts. */
export { MAX_HELD_ANNOUNCEMENTS }

export function encodeAnnouncementsRequest(r: { modelId?: string }): Uint8Array {
  const modelId = r.modelId ?? ''
  if (modelId !== '') stringField(modelId, 'announcements_request.model_id', { max: MAX_MODEL_ID_LENGTH, token: true })
  return encodeWire(schema.AnnouncementsRequest, { modelId })
}

export function decodeAnnouncementsRequest(bytes: Uint8Array): { modelId?: string } {
  const w = decodeWire(schema.AnnouncementsRequest, bytes, { maxMessageBytes: MAX_ANNOUNCEMENTS_REQUEST_BYTES })
  if (w.modelId == null || w.modelId === '') return {}
  return { modelId: stringField(w.modelId, 'announcements_request.model_id', { max: MAX_MODEL_ID_LENGTH, token: true }) }
}

/** Encodes as many of `list` as fit under MAX_ANNOUNCEMENTS_RESPONSE_BYTES, in order. */
export function encodeAnnouncementsResponse(list: readonly SignedAnnouncement[]): Uint8Array {
  const kept: SignedAnnouncement[] = []
  let bytes = 0
  for (const s of list) {
    signedFromWire(s)
    // field tag + length varint + the embedded message
    const size = encodeWire(schema.SignedAnnouncement, s).byteLength + 4
    if (bytes + size > MAX_ANNOUNCEMENTS_RESPONSE_BYTES) break
    bytes += size
    kept.push(s)
  }
  return encodeWire(schema.AnnouncementsResponse, { announcements: kept })
}

/** The signed announcements of a response, shape-checked (signatures are checked by the caller). */
export function decodeAnnouncementsResponse(bytes: Uint8Array): SignedAnnouncement[] {
  const w = decodeWire(schema.AnnouncementsResponse, bytes, { maxMessageBytes: MAX_ANNOUNCEMENTS_RESPONSE_BYTES })
  const list = arrayField(w.announcements, 'announcements_response.announcements', MAX_HELD_ANNOUNCEMENTS)
  return list.map((s) => signedFromWire(s))
}
