/**
 * Snapshot-key wrapping: how the client authorizes a peer to import (or export) a session's
 * KV. The client wraps the 32-byte snapshot key to the peer's announced X25519 key with an
 * ephemeral X25519 exchange + HKDF-SHA256 (RFC 5869) + AES-256-GCM (an ECIES/HPKE-base-mode
 * shape, cf. RFC 9180 §5.1), binding the recipient's peer id, session id and span.
 *
 * Ephemeral wrap layout (v1), 101 bytes:
 *   0   1  version = 1
 *   1   8  recipient key id = SHA-256(recipient X25519 public key)[0, 8)
 *   9  32  ephemeral X25519 public key
 *   41 12  nonce
 *   53 48  AES-256-GCM(key) ‖ tag
 *   KEK = HKDF(IKM = X25519(eph, recipient), salt = ephPub ‖ recipientPub, info = context, 32)
 *   AAD = context ‖ bytes [0, 41) ‖ recipientPub,  context = lp(label) ‖ lp(peer id) ‖ lp(session) ‖ span
 *
 * Hop-key wrap layout (v2, wrapKeyUnder: the KEK is HopKeys.snapshotKeyWrapKey), 61 bytes:
 *   version = 2 ‖ nonce [12] ‖ AES-256-GCM(key) ‖ tag,  AAD = context ‖ version
 */
import { createHash } from 'node:crypto'
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, open, randomNonce, seal } from './aead.js'
import { assertBytes, assertSpan, assertString, FieldWriter } from './encoding.js'
import { InvalidCryptoArgumentError, KeyNotForUsError, KeyUnwrapError, TagMismatchError } from './errors.js'
import { hkdfSha256 } from './hkdf.js'
import { generateX25519KeyPair, X25519_KEY_BYTES, x25519KeyPairFromSecret, x25519SharedSecret } from './keys.js'

export const WRAPPED_KEY_BYTES = 1 + 8 + 32 + GCM_NONCE_BYTES + 32 + GCM_TAG_BYTES
export const WRAPPED_KEY_UNDER_BYTES = 1 + GCM_NONCE_BYTES + 32 + GCM_TAG_BYTES
const LABEL = 'layerswarm/wrap-key/v1'

export interface WrapContext {
  /** libp2p peer id string of the peer allowed to unwrap. */
  readonly recipientPeerId: string
  readonly sessionId: string
  /** Blocks [start, end) the key is for. */
  readonly span: readonly [number, number]
}

function context(ctx: WrapContext): Uint8Array {
  if (ctx === null || typeof ctx !== 'object') throw new InvalidCryptoArgumentError('wrap context must be an object')
  assertString('recipientPeerId', ctx.recipientPeerId, 256)
  assertString('sessionId', ctx.sessionId, 256)
  assertSpan('span', ctx.span)
  return new FieldWriter()
    .string(LABEL)
    .string(ctx.recipientPeerId)
    .string(ctx.sessionId)
    .u32(ctx.span[0])
    .u32(ctx.span[1])
    .finish()
}

/** First 8 bytes of SHA-256 of an X25519 public key: says which key a wrapped key is for. */
export function x25519KeyId(publicKey: Uint8Array): Uint8Array {
  assertBytes('publicKey', publicKey, X25519_KEY_BYTES)
  return new Uint8Array(createHash('sha256').update(publicKey).digest().subarray(0, 8))
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const w = new FieldWriter()
  for (const p of parts) w.raw(p)
  return w.finish()
}

/** Wrap `key` (32 bytes) so only the holder of `recipientPublicKey`'s secret, in this context, can unwrap it. */
export function wrapKey(key: Uint8Array, recipientPublicKey: Uint8Array, ctx: WrapContext): Uint8Array {
  assertBytes('key', key, 32)
  assertBytes('recipientPublicKey', recipientPublicKey, X25519_KEY_BYTES)
  const info = context(ctx)
  const eph = generateX25519KeyPair()
  const shared = x25519SharedSecret(eph.secretKey, recipientPublicKey)
  const kek = hkdfSha256(shared, concat(eph.publicKey, recipientPublicKey), info, 32)
  eph.secretKey.fill(0)
  shared.fill(0)
  const out = new Uint8Array(WRAPPED_KEY_BYTES)
  out[0] = 1
  out.set(x25519KeyId(recipientPublicKey), 1)
  out.set(eph.publicKey, 9)
  const nonce = randomNonce()
  out.set(nonce, 41)
  seal(kek, nonce, key, concat(info, out.subarray(0, 41), recipientPublicKey), out.subarray(53))
  kek.fill(0)
  return out
}

/**
 * Unwrap a key wrapped to our X25519 key. KeyNotForUsError when it was wrapped to another key
 * (another peer); KeyUnwrapError when it was altered or bound to another peer id, session or span.
 */
export function unwrapKey(wrapped: Uint8Array, recipientSecretKey: Uint8Array, ctx: WrapContext): Uint8Array {
  assertBytes('wrapped', wrapped)
  const ours = x25519KeyPairFromSecret(recipientSecretKey).publicKey
  const info = context(ctx)
  if (wrapped.length !== WRAPPED_KEY_BYTES || wrapped[0] !== 1)
    throw new KeyUnwrapError(`malformed wrapped key (${wrapped.length} bytes)`)
  const id = x25519KeyId(ours)
  for (let i = 0; i < 8; i++) {
    if (wrapped[1 + i] !== id[i]) throw new KeyNotForUsError('the key was wrapped for another peer')
  }
  const ephPub = wrapped.subarray(9, 41)
  let shared: Uint8Array
  try {
    shared = x25519SharedSecret(recipientSecretKey, ephPub)
  } catch {
    throw new KeyUnwrapError('wrapped key has an invalid ephemeral public key')
  }
  const kek = hkdfSha256(shared, concat(ephPub, ours), info, 32)
  shared.fill(0)
  try {
    return open(kek, wrapped.subarray(41, 53), wrapped.subarray(53), concat(info, wrapped.subarray(0, 41), ours))
  } catch (e) {
    if (e instanceof TagMismatchError)
      throw new KeyUnwrapError('wrapped key does not authenticate (altered, or for another peer id, session or span)')
    throw e
  } finally {
    kek.fill(0)
  }
}

/** Wrap `key` under a shared key-encryption key (HopKeys.snapshotKeyWrapKey) for the current hop. */
export function wrapKeyUnder(kek: Uint8Array, key: Uint8Array, ctx: WrapContext): Uint8Array {
  assertBytes('kek', kek, 32)
  assertBytes('key', key, 32)
  const out = new Uint8Array(WRAPPED_KEY_UNDER_BYTES)
  out[0] = 2
  const nonce = randomNonce()
  out.set(nonce, 1)
  seal(kek, nonce, key, concat(context(ctx), out.subarray(0, 1)), out.subarray(1 + GCM_NONCE_BYTES))
  return out
}

/** Inverse of wrapKeyUnder; KeyUnwrapError when altered, under another KEK, or bound elsewhere. */
export function unwrapKeyUnder(kek: Uint8Array, wrapped: Uint8Array, ctx: WrapContext): Uint8Array {
  assertBytes('kek', kek, 32)
  assertBytes('wrapped', wrapped)
  const info = context(ctx)
  if (wrapped.length !== WRAPPED_KEY_UNDER_BYTES || wrapped[0] !== 2)
    throw new KeyUnwrapError(`malformed wrapped key (${wrapped.length} bytes)`)
  try {
    return open(
      kek,
      wrapped.subarray(1, 1 + GCM_NONCE_BYTES),
      wrapped.subarray(1 + GCM_NONCE_BYTES),
      concat(info, wrapped.subarray(0, 1))
    )
  } catch (e) {
    if (e instanceof TagMismatchError)
      throw new KeyUnwrapError('wrapped key does not authenticate (altered, or for another KEK, peer id, session or span)')
    throw e
  }
}
