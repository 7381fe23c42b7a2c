/**
 * HKDF-SHA256 (RFC 5869) via node:crypto, and the per-session, per-hop keys of layerswarm
 * (docs/design.md §6): every key is HKDF(IKM = X25519 shared secret, salt = empty, info =
 * length-prefixed label ‖ purpose ‖ sessionId ‖ span ‖ client peer id ‖ hop peer id, L = 32).
 * Putting every binding into `info` (RFC 5869 §3.2) makes keys of different sessions, spans,
 * peers or purposes independent; length prefixes make the encoding unambiguous.
 */
import { hkdfSync } from 'node:crypto'
import { assertBytes, assertSpan, assertString, FieldWriter } from './encoding.js'
import { InvalidCryptoArgumentError } from './errors.js'

/** RFC 5869 §2.3: L <= 255 * HashLen. */
const MAX_HKDF_BYTES = 255 * 32

/** HKDF-SHA256(ikm, salt, info) → `length` bytes (RFC 5869 §2.2 extract then §2.3 expand). */
export function hkdfSha256(ikm: Uint8Array, salt: Uint8Array, info: Uint8Array, length: number): Uint8Array {
  assertBytes('ikm', ikm)
  assertBytes('salt', salt)
  assertBytes('info', info)
  if (!Number.isInteger(length) || length < 1 || length > MAX_HKDF_BYTES) {
    throw new InvalidCryptoArgumentError(`HKDF output length must be in [1, ${MAX_HKDF_BYTES}], got ${length}`)
  }
  // node limits info to 1024 bytes; our infos are far smaller (ids are capped at 256 bytes).
  if (info.length > 1024) throw new InvalidCryptoArgumentError(`HKDF info of ${info.length} bytes exceeds 1024`)
  return new Uint8Array(hkdfSync('sha256', ikm, salt, info, length))
}

export const HOP_KEY_LABEL = 'layerswarm/hop-keys/v1'

/** What each derived hop key is for (the `purpose` field of its info). */
export const HOP_KEY_PURPOSES = ['step-mac', 'control-mac', 'snapshot-key-wrap', 'receipt-mac'] as const

export interface HopKeyContext {
  /** The raw X25519 shared secret of client and hop (x25519SharedSecret), 32 bytes. */
  readonly sharedSecret: Uint8Array
  readonly sessionId: string
  /** Blocks [start, end) the hop runs for this session. */
  readonly span: readonly [number, number]
  /** libp2p peer id strings. */
  readonly clientPeerId: string
  readonly hopPeerId: string
}

export interface HopKeys {
  /** HMAC-SHA256 key for step authorizations (mac.ts) in chained forwarding. */
  readonly stepMacKey: Uint8Array
  /** HMAC-SHA256 key for the client's control requests (rewind, export, import, close) when relayed. */
  readonly controlMacKey: Uint8Array
  /** AES-256-GCM key-encryption key the client wraps this hop's snapshot key under (wrapKeyUnder). */
  readonly snapshotKeyWrapKey: Uint8Array
  /** HMAC-SHA256 key for hop → client digests (e.g. chained-mode output digests). */
  readonly receiptMacKey: Uint8Array
}

/** The info of one hop key: every binding, length-prefixed, in a fixed order. */
export function hopKeyInfo(purpose: (typeof HOP_KEY_PURPOSES)[number], ctx: Omit<HopKeyContext, 'sharedSecret'>): Uint8Array {
  assertString('sessionId', ctx.sessionId, 256)
  assertSpan('span', ctx.span)
  assertString('clientPeerId', ctx.clientPeerId, 256)
  assertString('hopPeerId', ctx.hopPeerId, 256)
  return new FieldWriter()
    .string(HOP_KEY_LABEL)
    .string(purpose)
    .string(ctx.sessionId)
    .u32(ctx.span[0])
    .u32(ctx.span[1])
    .string(ctx.clientPeerId)
    .string(ctx.hopPeerId)
    .finish()
}

/** The keys client and hop share for one session over one span (both sides compute the same). */
export function deriveHopKeys(ctx: HopKeyContext): HopKeys {
  assertBytes('sharedSecret', ctx.sharedSecret, 32)
  const key = (purpose: (typeof HOP_KEY_PURPOSES)[number]) =>
    hkdfSha256(ctx.sharedSecret, new Uint8Array(0), hopKeyInfo(purpose, ctx), 32)
  return {
    stepMacKey: key('step-mac'),
    controlMacKey: key('control-mac'),
    snapshotKeyWrapKey: key('snapshot-key-wrap'),
    receiptMacKey: key('receipt-mac')
  }
}
