import { generateKeyPair } from '@libp2p/crypto/keys'
import { describe, expect, it } from 'vitest'
import {
  bindX25519Key,
  deriveHopKeys,
  generateX25519KeyPair,
  hkdfSha256,
  hopKeyInfo,
  InvalidCryptoArgumentError,
  verifyX25519Binding,
  x25519SharedSecret
} from '../../crypto/index.js'

describe('X25519 key binding signed by the libp2p Ed25519 identity', () => {
  it('verifies for the signer, fails for another identity, another key or an altered signature', async () => {
    const identity = await generateKeyPair('Ed25519')
    const other = await generateKeyPair('Ed25519')
    const x = generateX25519KeyPair()
    const sign = async (b: Uint8Array) => identity.sign(b)
    const verifyWith = (k: typeof identity) => async (b: Uint8Array, s: Uint8Array) => k.publicKey.verify(b, s)
    const sig = await bindX25519Key(x.publicKey, sign)
    expect(await verifyX25519Binding(x.publicKey, sig, verifyWith(identity))).toBe(true)
    expect(await verifyX25519Binding(x.publicKey, sig, verifyWith(other))).toBe(false)
    expect(await verifyX25519Binding(generateX25519KeyPair().publicKey, sig, verifyWith(identity))).toBe(false)
    const bad = sig.slice()
    bad[5] ^= 1
    expect(await verifyX25519Binding(x.publicKey, bad, verifyWith(identity))).toBe(false)
    // A signature over the bare key (no domain tag) is not a binding.
    expect(await verifyX25519Binding(x.publicKey, await identity.sign(x.publicKey), verifyWith(identity))).toBe(false)
    const throwing = async () => {
      throw new Error('bad key')
    }
    expect(await verifyX25519Binding(x.publicKey, sig, throwing)).toBe(false)
  })
  it('validates inputs', async () => {
    await expect(bindX25519Key(new Uint8Array(31), async () => new Uint8Array(64))).rejects.toThrow(InvalidCryptoArgumentError)
  })
})

describe('deriveHopKeys', () => {
  const client = generateX25519KeyPair()
  const hop = generateX25519KeyPair()
  const base = { sessionId: 's1', span: [2, 5] as const, clientPeerId: '12D3KooWclient', hopPeerId: '12D3KooWhop' }
  it('client and hop derive the same keys; every purpose gets its own key', () => {
    const c = deriveHopKeys({ ...base, sharedSecret: x25519SharedSecret(client.secretKey, hop.publicKey) })
    const h = deriveHopKeys({ ...base, sharedSecret: x25519SharedSecret(hop.secretKey, client.publicKey) })
    expect(h).toEqual(c)
    const all = Object.values(c).map((k) => Buffer.from(k).toString('hex'))
    expect(new Set(all).size).toBe(all.length)
    for (const k of Object.values(c)) expect(k.length).toBe(32)
  })
  it('keys change with the session, either span end, either peer id', () => {
    const sharedSecret = x25519SharedSecret(client.secretKey, hop.publicKey)
    const ref = deriveHopKeys({ ...base, sharedSecret }).stepMacKey
    const variants = [
      { sessionId: 's2' },
      { span: [2, 6] as const },
      { span: [1, 5] as const },
      { clientPeerId: '12D3KooWother' },
      { hopPeerId: '12D3KooWother' },
      // Length prefixes: moving a character between fields changes the key.
      { clientPeerId: '12D3KooWclient1', hopPeerId: '2D3KooWhop' }
    ]
    for (const v of variants) expect(deriveHopKeys({ ...base, ...v, sharedSecret }).stepMacKey).not.toEqual(ref)
  })
  it('is HKDF-SHA256 with an empty salt and the length-prefixed info', () => {
    const sharedSecret = new Uint8Array(32).fill(1)
    const keys = deriveHopKeys({ ...base, sharedSecret })
    expect(keys.snapshotKeyWrapKey).toEqual(
      hkdfSha256(sharedSecret, new Uint8Array(0), hopKeyInfo('snapshot-key-wrap', base), 32)
    )
    const info = hopKeyInfo('step-mac', base)
    const dv = new DataView(info.buffer)
    expect(dv.getUint32(0)).toBe('layerswarm/hop-keys/v1'.length)
  })
  it('validates inputs', () => {
    const sharedSecret = new Uint8Array(32)
    expect(() => deriveHopKeys({ ...base, sharedSecret: new Uint8Array(16) })).toThrow(InvalidCryptoArgumentError)
    expect(() => deriveHopKeys({ ...base, sharedSecret, span: [5, 5] })).toThrow(InvalidCryptoArgumentError)
    expect(() => deriveHopKeys({ ...base, sharedSecret, sessionId: '' })).toThrow(InvalidCryptoArgumentError)
  })
})
