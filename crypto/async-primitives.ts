/**
 * AES-256-GCM and X25519 behind one asynchronous interface with two implementations: node:crypto
 * (OpenSSL, through aead.ts and keys.ts) and WebCrypto (`crypto.subtle`: AES-GCM everywhere,
 * X25519 in Chromium 133+, Firefox 130+, Safari 17+ and Node 20). Same bytes in and out as the
 * synchronous functions: ciphertext ‖ 16-byte tag, the raw 32-byte shared secret, the same typed
 * errors. Both run the same known-answer vectors (test/crypto/async-primitives.test.ts in Node,
 * test/e2e/browser-chat.test.ts in Chromium, where the worker's `kat` self-test runs them).
 * The SDK's call sites are synchronous (session keys, step tags, sealed snapshots, the canary
 * bank), so in the browser they run on the bundle's node:crypto shim
 * (client/browser/shims/node-crypto.ts): WebCrypto has no synchronous API.
 */
import { AES_KEY_BYTES, GCM_NONCE_BYTES, GCM_TAG_BYTES, open, seal } from './aead.js'
import { assertBytes } from './encoding.js'
import { TagMismatchError, WeakPublicKeyError } from './errors.js'
import { X25519_KEY_BYTES, x25519 } from './keys.js'

export interface AsyncPrimitives {
  readonly name: 'node' | 'webcrypto'
  /** ciphertext ‖ tag of `plaintext` under (key, nonce) with associated data `aad`. */
  aesGcmSeal(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad?: Uint8Array): Promise<Uint8Array>
  /** The plaintext of ciphertext ‖ tag; TagMismatchError when it does not authenticate. */
  aesGcmOpen(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array, aad?: Uint8Array): Promise<Uint8Array>
  /** X25519(scalar, u) (RFC 7748 §5); WeakPublicKeyError for a low-order u (all-zero output). */
  x25519(scalar: Uint8Array, uCoordinate: Uint8Array): Promise<Uint8Array>
}

/** node:crypto (OpenSSL) through the synchronous functions of this folder. */
export const nodePrimitives: AsyncPrimitives = {
  name: 'node',
  aesGcmSeal: async (key, nonce, plaintext, aad) => seal(key, nonce, plaintext, aad),
  aesGcmOpen: async (key, nonce, sealed, aad) => open(key, nonce, sealed, aad),
  x25519: async (scalar, u) => x25519(scalar, u)
}

/** The subset of SubtleCrypto used here (the project's lib has no DOM types). */
interface Subtle {
  importKey(format: string, data: Uint8Array, algorithm: unknown, extractable: boolean, usages: string[]): Promise<unknown>
  encrypt(algorithm: unknown, key: unknown, data: Uint8Array): Promise<ArrayBuffer>
  decrypt(algorithm: unknown, key: unknown, data: Uint8Array): Promise<ArrayBuffer>
  deriveBits(algorithm: unknown, key: unknown, length: number): Promise<ArrayBuffer>
}

// RFC 8410 §7: a raw X25519 private key as PKCS#8 (WebCrypto imports X25519 private keys only so)
const PKCS8_X25519 = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20
])

function gcmParams(nonce: Uint8Array, aad?: Uint8Array): Record<string, unknown> {
  return { name: 'AES-GCM', iv: nonce, tagLength: GCM_TAG_BYTES * 8, ...(aad !== undefined ? { additionalData: aad } : {}) }
}

function checkKeyNonce(key: Uint8Array, nonce: Uint8Array, aad?: Uint8Array): void {
  assertBytes('key', key, AES_KEY_BYTES)
  assertBytes('nonce', nonce, GCM_NONCE_BYTES)
  if (aad !== undefined) assertBytes('aad', aad)
}

/** WebCrypto (`globalThis.crypto.subtle` unless given). */
export function webCryptoPrimitives(
  subtle: Subtle = (globalThis as unknown as { crypto: { subtle: Subtle } }).crypto.subtle
): AsyncPrimitives {
  return {
    name: 'webcrypto',
    async aesGcmSeal(key, nonce, plaintext, aad) {
      checkKeyNonce(key, nonce, aad)
      assertBytes('plaintext', plaintext)
      const k = await subtle.importKey('raw', key, { name: 'AES-GCM' }, false, ['encrypt'])
      return new Uint8Array(await subtle.encrypt(gcmParams(nonce, aad), k, plaintext))
    },
    async aesGcmOpen(key, nonce, sealed, aad) {
      checkKeyNonce(key, nonce, aad)
      assertBytes('sealed', sealed)
      if (sealed.length < GCM_TAG_BYTES) throw new TagMismatchError(`sealed data of ${sealed.length} bytes is shorter than a tag`)
      const k = await subtle.importKey('raw', key, { name: 'AES-GCM' }, false, ['decrypt'])
      try {
        return new Uint8Array(await subtle.decrypt(gcmParams(nonce, aad), k, sealed))
      } catch (err) {
        throw new TagMismatchError('AES-GCM authentication failed (wrong key, or altered ciphertext, tag or associated data)', {
          cause: err
        })
      }
    },
    async x25519(scalar, u) {
      assertBytes('scalar', scalar, X25519_KEY_BYTES)
      assertBytes('uCoordinate', u, X25519_KEY_BYTES)
      const der = new Uint8Array(PKCS8_X25519.length + X25519_KEY_BYTES)
      der.set(PKCS8_X25519)
      der.set(scalar, PKCS8_X25519.length)
      let shared: Uint8Array
      try {
        const priv = await subtle.importKey('pkcs8', der, { name: 'X25519' }, false, ['deriveBits'])
        const pub = await subtle.importKey('raw', u, { name: 'X25519' }, true, [])
        shared = new Uint8Array(await subtle.deriveBits({ name: 'X25519', public: pub }, priv, 8 * X25519_KEY_BYTES))
      } catch (err) {
        // WebCrypto refuses the all-zero result of a low-order point (as OpenSSL does)
        throw new WeakPublicKeyError('the peer X25519 public key is a low-order point (all-zero shared secret)', { cause: err })
      } finally {
        der.fill(0)
      }
      if (shared.every((b) => b === 0))
        throw new WeakPublicKeyError('the peer X25519 public key is a low-order point (all-zero shared secret)')
      return shared
    }
  }
}
