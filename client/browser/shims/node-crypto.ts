/**
 * The part of node:crypto that the SDK's modules use, for the browser bundle (the bundler maps
 * `node:crypto` here: scripts/build-browser.mjs). Same signatures, same bytes: SHA-256, HMAC
 * (RFC 2104), HKDF (RFC 5869), AES-256-GCM (SP 800-38D), X25519 (RFC 7748) and Ed25519
 * (RFC 8032) from the audited @noble libraries (already in the tree under libp2p's Noise), and
 * randomness from the browser's CSPRNG (crypto.getRandomValues). Synchronous, as the call sites
 * are (WebCrypto's subtle API is asynchronous only). test/client/browser-crypto.test.ts runs the
 * project's known-answer vectors through this module and cross-checks it with node:crypto.
 */
import { gcm } from '@noble/ciphers/aes.js'
import { ed25519, x25519 } from '@noble/curves/ed25519.js'
import { hkdf } from '@noble/hashes/hkdf.js'
import { hmac } from '@noble/hashes/hmac.js'
import { sha256 } from '@noble/hashes/sha2.js'
import { NotInBrowserError } from '../errors.js'

type Bytes = Uint8Array
type Input = string | Uint8Array
type Encoding = 'hex' | 'base64' | undefined

const utf8 = new TextEncoder()
const bytesOf = (v: Input | ArrayBuffer): Bytes =>
  typeof v === 'string'
    ? utf8.encode(v)
    : v instanceof ArrayBuffer
      ? new Uint8Array(v)
      : new Uint8Array(v.buffer, v.byteOffset, v.byteLength)

/** Digests are Buffers, as Node's are (callers read them with readUIntBE): the bundle's Buffer. */
function encode(b: Bytes, enc: Encoding): Bytes | string {
  if (enc === 'hex') return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
  if (enc === 'base64') return btoa(String.fromCharCode(...b))
  if (enc !== undefined) throw new NotInBrowserError(`digest encoding ${enc} is not supported in the browser`)
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength)
}

const webCrypto = (): { getRandomValues(b: Bytes): Bytes; randomUUID(): string } =>
  (globalThis as unknown as { crypto: { getRandomValues(b: Bytes): Bytes; randomUUID(): string } }).crypto

export function randomBytes(n: number): Bytes {
  const out = new Uint8Array(n)
  for (let i = 0; i < n; i += 65536) webCrypto().getRandomValues(out.subarray(i, Math.min(n, i + 65536)))
  return out
}

export function randomUUID(): string {
  return webCrypto().randomUUID()
}

interface Hasher {
  update(data: Input): Hasher
  digest(enc?: Encoding): Bytes & string
  copy(): Hasher
}

function wrapHash(h: { update(b: Bytes): unknown; digest(): Bytes; clone(): unknown }): Hasher {
  return {
    update(data) {
      h.update(bytesOf(data))
      return this
    },
    digest: (enc) => encode(h.digest(), enc) as Bytes & string,
    copy: () => wrapHash(h.clone() as typeof h)
  }
}

export function createHash(algorithm: string): Hasher {
  if (algorithm !== 'sha256') throw new NotInBrowserError(`hash ${algorithm} is not supported in the browser`)
  return wrapHash(sha256.create())
}

export function createHmac(algorithm: string, key: Input): Hasher {
  if (algorithm !== 'sha256') throw new NotInBrowserError(`HMAC ${algorithm} is not supported in the browser`)
  return wrapHash(hmac.create(sha256, bytesOf(key)))
}

export function hkdfSync(digest: string, ikm: Input, salt: Input, info: Input, length: number): ArrayBuffer {
  if (digest !== 'sha256') throw new NotInBrowserError(`HKDF ${digest} is not supported in the browser`)
  const okm = hkdf(sha256, bytesOf(ikm), bytesOf(salt), bytesOf(info), length)
  return okm.buffer.slice(okm.byteOffset, okm.byteOffset + okm.byteLength) as ArrayBuffer
}

export function timingSafeEqual(a: Bytes, b: Bytes): boolean {
  if (a.length !== b.length) throw new RangeError('Input buffers must have the same byte length')
  let acc = 0
  for (let i = 0; i < a.length; i++) acc |= a[i] ^ b[i]
  return acc === 0
}

/** AES-256-GCM with node's Cipher shape; the whole message is processed at final(). */
class Gcm {
  private readonly parts: Bytes[] = []
  private aad: Bytes | undefined
  private tag: Bytes | undefined
  constructor(
    private readonly key: Bytes,
    private readonly nonce: Bytes,
    private readonly decrypt: boolean
  ) {}
  setAAD(aad: Bytes): this {
    this.aad = aad.slice()
    return this
  }
  setAuthTag(tag: Bytes): this {
    this.tag = tag.slice()
    return this
  }
  getAuthTag(): Bytes {
    if (!this.tag) throw new Error('getAuthTag before final')
    return this.tag
  }
  update(data: Bytes): Bytes {
    this.parts.push(data.slice())
    return new Uint8Array(0)
  }
  final(): Bytes {
    const n = this.parts.reduce((s, p) => s + p.length, 0)
    const input = new Uint8Array(n + (this.decrypt ? 16 : 0))
    let o = 0
    for (const p of this.parts) {
      input.set(p, o)
      o += p.length
    }
    const cipher = gcm(this.key, this.nonce, this.aad)
    if (!this.decrypt) {
      const sealed = cipher.encrypt(input)
      this.tag = sealed.slice(n)
      return sealed.subarray(0, n)
    }
    if (!this.tag) throw new Error('Unsupported state or unable to authenticate data')
    input.set(this.tag, n)
    return cipher.decrypt(input) // throws on a bad tag, as node's final() does
  }
}

function gcmOf(algorithm: string, key: Bytes, iv: Bytes, decrypt: boolean): Gcm {
  if (algorithm !== 'aes-256-gcm') throw new NotInBrowserError(`cipher ${algorithm} is not supported in the browser`)
  return new Gcm(bytesOf(key).slice(), bytesOf(iv).slice(), decrypt)
}
export const createCipheriv = (algorithm: string, key: Bytes, iv: Bytes, _o?: unknown): Gcm => gcmOf(algorithm, key, iv, false)
export const createDecipheriv = (algorithm: string, key: Bytes, iv: Bytes, _o?: unknown): Gcm => gcmOf(algorithm, key, iv, true)

// X25519 and Ed25519 keys as node's KeyObject: DER in (PKCS#8, SPKI; RFC 8410), raw inside.
const OID_X25519 = 0x6e
const OID_ED25519 = 0x70
type Curve = 'x25519' | 'ed25519'

export class KeyObject {
  constructor(
    readonly type: 'private' | 'public',
    readonly asymmetricKeyType: Curve,
    readonly raw: Bytes
  ) {}
  export(o: { format: 'der'; type: 'spki' | 'pkcs8' }): Bytes {
    const oid = this.asymmetricKeyType === 'x25519' ? OID_X25519 : OID_ED25519
    const prefix =
      o.type === 'pkcs8'
        ? [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, oid, 0x04, 0x22, 0x04, 0x20]
        : [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, oid, 0x03, 0x21, 0x00]
    const raw = o.type === 'pkcs8' ? this.raw : publicRaw(this)
    const out = new Uint8Array(prefix.length + 32)
    out.set(prefix)
    out.set(raw, prefix.length)
    return out
  }
}

function publicRaw(k: KeyObject): Bytes {
  if (k.type === 'public') return k.raw
  return k.asymmetricKeyType === 'x25519' ? x25519.getPublicKey(k.raw) : ed25519.getPublicKey(k.raw)
}

function parseDer(der: Bytes, kind: 'pkcs8' | 'spki'): KeyObject {
  const oid = der[kind === 'pkcs8' ? 11 : 8]
  if (der.length !== (kind === 'pkcs8' ? 48 : 44) || (oid !== OID_X25519 && oid !== OID_ED25519))
    throw new NotInBrowserError(`only raw X25519 and Ed25519 ${kind} keys are supported in the browser`)
  return new KeyObject(
    kind === 'pkcs8' ? 'private' : 'public',
    oid === OID_X25519 ? 'x25519' : 'ed25519',
    der.slice(der.length - 32)
  )
}

export function createPrivateKey(o: { key: Bytes; format: 'der'; type: 'pkcs8' }): KeyObject {
  return parseDer(bytesOf(o.key), 'pkcs8')
}

export function createPublicKey(o: KeyObject | { key: Bytes; format: 'der'; type: 'spki' }): KeyObject {
  if (o instanceof KeyObject) return new KeyObject('public', o.asymmetricKeyType, publicRaw(o))
  return parseDer(bytesOf(o.key), 'spki')
}

export function generateKeyPairSync(type: string): { publicKey: KeyObject; privateKey: KeyObject } {
  if (type !== 'x25519') throw new NotInBrowserError(`key type ${type} is not supported in the browser`)
  const privateKey = new KeyObject('private', 'x25519', randomBytes(32))
  return { privateKey, publicKey: createPublicKey(privateKey) }
}

/** X25519 only; like OpenSSL, an all-zero result (a low-order public key) throws. */
export function diffieHellman(o: { privateKey: KeyObject; publicKey: KeyObject }): Bytes {
  const shared = x25519.getSharedSecret(o.privateKey.raw, o.publicKey.raw)
  if (shared.every((b) => b === 0)) throw new Error('Failed to derive shared secret: low-order point')
  return shared
}

export function sign(_algorithm: null, data: Bytes, key: KeyObject): Bytes {
  return ed25519.sign(bytesOf(data), key.raw)
}

export function verify(_algorithm: null, data: Bytes, key: KeyObject, signature: Bytes): boolean {
  try {
    return ed25519.verify(bytesOf(signature), bytesOf(data), key.raw)
  } catch {
    return false
  }
}
