/**
 * X25519 key agreement keys (RFC 7748) via node:crypto (OpenSSL: constant time, a fraction of
 * the pure-JS scalar multiplication's cost, which matters because a node runs one per open), and the "key binding" a peer announces:
 * its X25519 public key signed by its libp2p Ed25519 identity, so a client knows the key it
 * wraps snapshot keys to belongs to that peer. Signing and verification are passed in as
 * functions, so crypto/ does not depend on libp2p.
 */
import { createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { assertBytes, FieldWriter } from './encoding.js'
import { InvalidCryptoArgumentError, WeakPublicKeyError } from './errors.js'

export const X25519_KEY_BYTES = 32

export interface X25519KeyPair {
  readonly publicKey: Uint8Array
  readonly secretKey: Uint8Array
}

/** Signs bytes with the peer's identity key (libp2p: `privateKey.sign`). */
export type SignFn = (bytes: Uint8Array) => Promise<Uint8Array>
/** Verifies a signature made by the peer's identity key (libp2p: `peerId.publicKey.verify`). */
export type VerifyFn = (bytes: Uint8Array, signature: Uint8Array) => Promise<boolean>

/** Domain tag of the key binding, so the signature can never be taken for another signed message. */
export const X25519_BINDING_DOMAIN = 'layerswarm/x25519-binding/v1'

// DER wrappers of raw X25519 keys (RFC 8410 §7: PKCS#8 private keys, SubjectPublicKeyInfo public keys).
const PKCS8_PREFIX = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20
])
const SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x03, 0x21, 0x00])

function privateKeyObject(secretKey: Uint8Array): KeyObject {
  const der = new Uint8Array(PKCS8_PREFIX.length + X25519_KEY_BYTES)
  der.set(PKCS8_PREFIX)
  der.set(secretKey, PKCS8_PREFIX.length)
  try {
    return createPrivateKey({ key: Buffer.from(der.buffer, der.byteOffset, der.byteLength), format: 'der', type: 'pkcs8' })
  } finally {
    der.fill(0)
  }
}

function publicKeyObject(publicKey: Uint8Array): KeyObject {
  const der = new Uint8Array(SPKI_PREFIX.length + X25519_KEY_BYTES)
  der.set(SPKI_PREFIX)
  der.set(publicKey, SPKI_PREFIX.length)
  return createPublicKey({ key: Buffer.from(der.buffer), format: 'der', type: 'spki' })
}

function rawPublicKey(key: KeyObject): Uint8Array {
  const der = key.export({ format: 'der', type: 'spki' })
  return new Uint8Array(der.subarray(der.length - X25519_KEY_BYTES))
}

function rawSecretKey(key: KeyObject): Uint8Array {
  const der = key.export({ format: 'der', type: 'pkcs8' })
  const raw = new Uint8Array(der.subarray(der.length - X25519_KEY_BYTES))
  der.fill(0)
  return raw
}

/** A fresh X25519 key pair (the secret key from OpenSSL's CSPRNG). */
export function generateX25519KeyPair(): X25519KeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('x25519')
  return { publicKey: rawPublicKey(publicKey), secretKey: rawSecretKey(privateKey) }
}

/** The key pair of a 32-byte secret key (clamping is done inside the scalar multiplication, RFC 7748 §5). */
export function x25519KeyPairFromSecret(secretKey: Uint8Array): X25519KeyPair {
  assertBytes('secretKey', secretKey, X25519_KEY_BYTES)
  return { publicKey: rawPublicKey(createPublicKey(privateKeyObject(secretKey))), secretKey: secretKey.slice() }
}

/**
 * X25519(k, u) (RFC 7748 §5), exposed for the RFC test vectors. OpenSSL refuses to return the
 * all-zero output of a low-order u; that is reported as WeakPublicKeyError.
 */
export function x25519(scalar: Uint8Array, uCoordinate: Uint8Array): Uint8Array {
  assertBytes('scalar', scalar, X25519_KEY_BYTES)
  assertBytes('uCoordinate', uCoordinate, X25519_KEY_BYTES)
  let out: Buffer
  try {
    out = diffieHellman({ privateKey: privateKeyObject(scalar), publicKey: publicKeyObject(uCoordinate) })
  } catch (err) {
    throw new WeakPublicKeyError('the peer X25519 public key is a low-order point (all-zero shared secret)', { cause: err })
  }
  const shared = new Uint8Array(out)
  out.fill(0)
  return shared
}

/**
 * The raw X25519 shared secret of our secret key and the peer's public key (RFC 7748 §6.1).
 * Refuses the all-zero result (a low-order public key) with WeakPublicKeyError, as §6.1
 * recommends. Feed the result to HKDF (deriveHopKeys), never use it as a key directly.
 */
export function x25519SharedSecret(secretKey: Uint8Array, peerPublicKey: Uint8Array): Uint8Array {
  assertBytes('secretKey', secretKey, X25519_KEY_BYTES)
  assertBytes('peerPublicKey', peerPublicKey, X25519_KEY_BYTES)
  const shared = x25519(secretKey, peerPublicKey)
  let acc = 0
  for (let i = 0; i < shared.length; i++) acc |= shared[i]
  if (acc === 0) throw new WeakPublicKeyError('the peer X25519 public key is a low-order point (all-zero shared secret)')
  return shared
}

/** The exact bytes a key binding signs: length-prefixed domain tag ‖ length-prefixed public key. */
export function x25519BindingMessage(publicKey: Uint8Array): Uint8Array {
  assertBytes('publicKey', publicKey, X25519_KEY_BYTES)
  return new FieldWriter().string(X25519_BINDING_DOMAIN).bytes(publicKey).finish()
}

/** Sign our X25519 public key with our identity key; announce `{ publicKey, signature }`. */
export async function bindX25519Key(publicKey: Uint8Array, sign: SignFn): Promise<Uint8Array> {
  if (typeof sign !== 'function') throw new InvalidCryptoArgumentError('sign must be a function')
  const signature = await sign(x25519BindingMessage(publicKey))
  assertBytes('signature', signature)
  return signature
}

/**
 * True when `signature` is the peer identity's signature over its X25519 public key. A false
 * result (or a verify function that throws) means the key must not be used for that peer.
 */
export async function verifyX25519Binding(publicKey: Uint8Array, signature: Uint8Array, verify: VerifyFn): Promise<boolean> {
  if (typeof verify !== 'function') throw new InvalidCryptoArgumentError('verify must be a function')
  assertBytes('signature', signature)
  const message = x25519BindingMessage(publicKey)
  try {
    return (await verify(message, signature)) === true
  } catch {
    return false
  }
}
