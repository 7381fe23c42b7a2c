import { createPrivateKey, createPublicKey, diffieHellman } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  hkdfSha256,
  hmacSha256,
  InvalidCryptoArgumentError,
  open,
  seal,
  TagMismatchError,
  WeakPublicKeyError,
  x25519,
  x25519KeyPairFromSecret,
  x25519SharedSecret
} from '../../crypto/index.js'

// Known-answer tests: RFC 5869 (HKDF-SHA256), RFC 7748 (X25519), the GCM spec's AES-256
// test cases (McGrew & Viega, as used in NIST CAVP), RFC 4231 (HMAC-SHA256).

const hex = (s: string) => new Uint8Array(Buffer.from(s.replace(/\s+/g, ''), 'hex'))
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex')
const range = (from: number, to: number) => Uint8Array.from({ length: to - from + 1 }, (_, i) => from + i)

describe('HKDF-SHA256, RFC 5869 Appendix A', () => {
  it('A.1 basic test case', () => {
    const okm = hkdfSha256(new Uint8Array(22).fill(0x0b), range(0x00, 0x0c), range(0xf0, 0xf9), 42)
    expect(toHex(okm)).toBe('3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865')
  })
  it('A.2 longer inputs and outputs', () => {
    const okm = hkdfSha256(range(0x00, 0x4f), range(0x60, 0xaf), range(0xb0, 0xff), 82)
    expect(toHex(okm)).toBe(
      'b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87'
    )
  })
  it('A.3 zero-length salt and info', () => {
    const okm = hkdfSha256(new Uint8Array(22).fill(0x0b), new Uint8Array(0), new Uint8Array(0), 42)
    expect(toHex(okm)).toBe('8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8')
  })
  it('validates its inputs', () => {
    expect(() => hkdfSha256(new Uint8Array(32), new Uint8Array(0), new Uint8Array(0), 255 * 32 + 1)).toThrow(
      InvalidCryptoArgumentError
    )
    expect(() => hkdfSha256('x' as unknown as Uint8Array, new Uint8Array(0), new Uint8Array(0), 32)).toThrow(
      InvalidCryptoArgumentError
    )
  })
})

describe('X25519, RFC 7748', () => {
  it('§5.2 test vector', () => {
    const out = x25519(
      hex('a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4'),
      hex('e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c')
    )
    expect(toHex(out)).toBe('c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552')
  })
  it('§5.2 iterated: 1 and 1000 iterations from k = u = 9', () => {
    let k: Uint8Array = new Uint8Array(32)
    k[0] = 9
    let u: Uint8Array = k.slice()
    for (let i = 1; i <= 1000; i++) {
      const next = x25519(k, u)
      u = k
      k = next
      if (i === 1) expect(toHex(k)).toBe('422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079')
    }
    expect(toHex(k)).toBe('684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51')
  })
  it('§6.1 Diffie-Hellman between Alice and Bob', () => {
    const alice = x25519KeyPairFromSecret(hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a'))
    const bob = x25519KeyPairFromSecret(hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb'))
    expect(toHex(alice.publicKey)).toBe('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a')
    expect(toHex(bob.publicKey)).toBe('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f')
    const shared = '4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742'
    expect(toHex(x25519SharedSecret(alice.secretKey, bob.publicKey))).toBe(shared)
    expect(toHex(x25519SharedSecret(bob.secretKey, alice.publicKey))).toBe(shared)
  })
  it('agrees with node:crypto (OpenSSL) on the same keys', () => {
    const a = x25519KeyPairFromSecret(hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a'))
    const b = x25519KeyPairFromSecret(hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb'))
    // PKCS#8 / SPKI prefixes for X25519 (RFC 8410).
    const privateKey = createPrivateKey({
      key: Buffer.concat([hex('302e020100300506032b656e04220420'), a.secretKey]),
      format: 'der',
      type: 'pkcs8'
    })
    const publicKey = createPublicKey({
      key: Buffer.concat([hex('302a300506032b656e032100'), b.publicKey]),
      format: 'der',
      type: 'spki'
    })
    expect(toHex(diffieHellman({ privateKey, publicKey }))).toBe(toHex(x25519SharedSecret(a.secretKey, b.publicKey)))
  })
  it('§6.1: refuses a low-order public key (all-zero shared secret)', () => {
    const { secretKey } = x25519KeyPairFromSecret(new Uint8Array(32).fill(7))
    expect(() => x25519SharedSecret(secretKey, new Uint8Array(32))).toThrow(WeakPublicKeyError)
    const order8 = hex('e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800')
    expect(() => x25519SharedSecret(secretKey, order8)).toThrow(WeakPublicKeyError)
  })
})

describe('AES-256-GCM, GCM spec test cases 13, 14, 16', () => {
  it('13: empty plaintext, zero key and IV', () => {
    expect(toHex(seal(new Uint8Array(32), new Uint8Array(12), new Uint8Array(0)))).toBe('530f8afbc74536b9a963b4f1c4cb738b')
  })
  it('14: one zero block', () => {
    expect(toHex(seal(new Uint8Array(32), new Uint8Array(12), new Uint8Array(16)))).toBe(
      'cea7403d4d606b6e074ec5d3baf39d18' + 'd0d1c8a799996bf0265b98b5d48ab919'
    )
  })
  const K = hex('feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308')
  const IV = hex('cafebabefacedbaddecaf888')
  const A = hex('feedfacedeadbeeffeedfacedeadbeefabaddad2')
  const P = hex(
    'd9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39'
  )
  const CT =
    '522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662' +
    '76fc6ece0f4e1768cddf8853bb2d551b'
  it('16: with associated data, seal and open (also into a reused buffer, and from parts)', () => {
    expect(toHex(seal(K, IV, P, A))).toBe(CT)
    const out = new Uint8Array(200).fill(0xaa)
    expect(toHex(seal(K, IV, [P.subarray(0, 7), P.subarray(7)], A, out))).toBe(CT)
    expect(toHex(open(K, IV, hex(CT), A))).toBe(toHex(P))
    expect(toHex(open(K, IV, hex(CT), A, out))).toBe(toHex(P))
  })
  it('16: any altered byte of ciphertext, tag or AAD is a TagMismatchError and leaves a zeroed output', () => {
    const sealed = hex(CT)
    for (const i of [0, 30, sealed.length - 17, sealed.length - 1]) {
      const bad = sealed.slice()
      bad[i] ^= 1
      const out = new Uint8Array(P.length)
      expect(() => open(K, IV, bad, A, out)).toThrow(TagMismatchError)
      expect(out.every((b) => b === 0)).toBe(true)
    }
    const badA = A.slice()
    badA[0] ^= 0x80
    expect(() => open(K, IV, sealed, badA)).toThrow(TagMismatchError)
    expect(() => open(K, IV, sealed.subarray(0, 10), A)).toThrow(TagMismatchError)
  })
})

describe('HMAC-SHA256, RFC 4231', () => {
  it('test case 2', () => {
    const mac = hmacSha256(new TextEncoder().encode('Jefe'), new TextEncoder().encode('what do ya want for nothing?'))
    expect(toHex(mac)).toBe('5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843')
  })
})
