// The browser bundle's node:crypto (client/browser/shims/node-crypto.ts, on @noble) against the
// same known-answer vectors as node:crypto: this file maps node:crypto to the shim for our
// modules, then runs the project's own vector, key and receipt tests through it; and it
// cross-checks both implementations byte for byte on random inputs.
import type * as NodeCrypto from 'node:crypto'
import { describe, expect, it, vi } from 'vitest'
import * as shim from '../../client/browser/shims/node-crypto.js'

vi.mock('node:crypto', async () => await import('../../client/browser/shims/node-crypto.js'))

await import('../crypto/vectors.test.js')
await import('../crypto/keys.test.js')
await import('../protocol/receipt.test.js')

const real = await vi.importActual<typeof NodeCrypto>('node:crypto')
const rnd = (n: number): Uint8Array => new Uint8Array(real.randomBytes(n))
const hex = (b: Uint8Array | string): string => (typeof b === 'string' ? b : Buffer.from(b).toString('hex'))

describe('browser node:crypto shim equals node:crypto (OpenSSL)', () => {
  it('SHA-256, HMAC-SHA256 and HKDF-SHA256 on random inputs, incremental and copied hashes', () => {
    for (const n of [0, 1, 63, 64, 65, 1000, 100_000]) {
      const data = rnd(n)
      const key = rnd(1 + (n % 97))
      expect(hex(shim.createHash('sha256').update(data).digest())).toBe(hex(real.createHash('sha256').update(data).digest()))
      expect(shim.createHash('sha256').update('text').update(data).digest('hex')).toBe(
        real.createHash('sha256').update('text').update(data).digest('hex')
      )
      expect(hex(shim.createHmac('sha256', key).update(data).digest())).toBe(
        hex(real.createHmac('sha256', key).update(data).digest())
      )
      const salt = rnd(n % 40)
      const info = rnd(n % 17)
      expect(hex(new Uint8Array(shim.hkdfSync('sha256', key, salt, info, 77)))).toBe(
        hex(new Uint8Array(real.hkdfSync('sha256', key, salt, info, 77)))
      )
    }
    const h = shim.createHash('sha256').update('a')
    const c = h.copy().update('b')
    expect(h.digest('hex')).toBe(real.createHash('sha256').update('a').digest('hex'))
    expect(c.digest('hex')).toBe(real.createHash('sha256').update('ab').digest('hex'))
  })

  it('AES-256-GCM: same ciphertext and tag; each opens the other; a bad tag throws', () => {
    for (const n of [0, 15, 16, 1000, 300_000]) {
      const key = rnd(32)
      const iv = rnd(12)
      const aad = rnd(n % 50)
      const pt = rnd(n)
      const a = real.createCipheriv('aes-256-gcm', key, iv, { authTagLength: 16 })
      a.setAAD(aad)
      const ctReal = Buffer.concat([a.update(pt), a.final()])
      const b = shim.createCipheriv('aes-256-gcm', key, iv)
      b.setAAD(aad)
      b.update(pt.subarray(0, n >> 1))
      b.update(pt.subarray(n >> 1))
      const ctShim = b.final()
      expect(hex(ctShim)).toBe(hex(ctReal))
      expect(hex(b.getAuthTag())).toBe(hex(a.getAuthTag()))
      const d = shim.createDecipheriv('aes-256-gcm', key, iv)
      d.setAuthTag(a.getAuthTag())
      d.setAAD(aad)
      d.update(ctReal)
      expect(hex(d.final())).toBe(hex(pt))
      const bad = shim.createDecipheriv('aes-256-gcm', key, iv)
      const tag = b.getAuthTag().slice()
      tag[0] ^= 1
      bad.setAuthTag(tag)
      bad.setAAD(aad)
      bad.update(ctShim)
      expect(() => bad.final()).toThrow()
    }
  })

  it('X25519 agreement and Ed25519 signatures interoperate across the two', () => {
    const mine = shim.generateKeyPairSync('x25519')
    const theirs = real.generateKeyPairSync('x25519')
    const theirPub = shim.createPublicKey({
      key: theirs.publicKey.export({ format: 'der', type: 'spki' }),
      format: 'der',
      type: 'spki'
    })
    const myPubReal = real.createPublicKey({
      key: Buffer.from(mine.publicKey.export({ format: 'der', type: 'spki' })),
      format: 'der',
      type: 'spki'
    })
    expect(hex(shim.diffieHellman({ privateKey: mine.privateKey, publicKey: theirPub }))).toBe(
      hex(real.diffieHellman({ privateKey: theirs.privateKey, publicKey: myPubReal }))
    )
    const ed = real.generateKeyPairSync('ed25519')
    const edPriv = shim.createPrivateKey({
      key: ed.privateKey.export({ format: 'der', type: 'pkcs8' }),
      format: 'der',
      type: 'pkcs8'
    })
    const edPub = shim.createPublicKey({ key: ed.publicKey.export({ format: 'der', type: 'spki' }), format: 'der', type: 'spki' })
    const msg = rnd(100)
    const sig = shim.sign(null, msg, edPriv)
    expect(hex(sig)).toBe(hex(real.sign(null, msg, ed.privateKey))) // Ed25519 is deterministic (RFC 8032)
    expect(shim.verify(null, msg, edPub, real.sign(null, msg, ed.privateKey))).toBe(true)
    msg[0] ^= 1
    expect(shim.verify(null, msg, edPub, sig)).toBe(false)
  })

  it('our modules see the shim in this file (the vector tests above ran through it)', async () => {
    expect((await import('node:crypto')).KeyObject).toBe(shim.KeyObject)
  })

  it('randomness comes from the CSPRNG; unsupported algorithms are typed errors', () => {
    expect(shim.randomBytes(70_000).some((b) => b !== 0)).toBe(true)
    expect(shim.randomUUID()).toMatch(/^[0-9a-f-]{36}$/)
    expect(() => shim.createHash('md5')).toThrow(expect.objectContaining({ code: 'ERR_NOT_IN_BROWSER' }))
    expect(() => shim.createCipheriv('aes-128-cbc', rnd(16), rnd(16))).toThrow(
      expect.objectContaining({ code: 'ERR_NOT_IN_BROWSER' })
    )
  })
})
