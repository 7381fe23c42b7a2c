import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  checkKnownAnswers,
  type KnownAnswerVectors,
  nodePrimitives,
  TagMismatchError,
  WeakPublicKeyError,
  webCryptoPrimitives
} from '../../crypto/index.js'
import { REFERENCE_DIR } from '../helpers/reference.js'

const vectors = JSON.parse(readFileSync(join(REFERENCE_DIR, 'crypto-kat.json'), 'utf8')) as KnownAnswerVectors

describe.each([nodePrimitives, webCryptoPrimitives()])('AsyncPrimitives: $name', (p) => {
  it('passes the known-answer vectors (RFC 7748 X25519, GCM spec AES-256 cases)', async () => {
    expect(await checkKnownAnswers(p, vectors)).toEqual([])
  })
  it('agrees with the other implementation on random keys and messages', async () => {
    const other = p.name === 'node' ? webCryptoPrimitives() : nodePrimitives
    for (const n of [0, 1, 17, 4096, 100_000]) {
      const key = crypto.getRandomValues(new Uint8Array(32))
      const nonce = crypto.getRandomValues(new Uint8Array(12))
      const aad = crypto.getRandomValues(new Uint8Array(n % 33))
      const pt = new Uint8Array(n).map((_, i) => (i * 31) & 255)
      const sealed = await p.aesGcmSeal(key, nonce, pt, aad)
      expect(sealed).toEqual(await other.aesGcmSeal(key, nonce, pt, aad))
      expect(await other.aesGcmOpen(key, nonce, sealed, aad)).toEqual(pt)
      const a = crypto.getRandomValues(new Uint8Array(32))
      const b = crypto.getRandomValues(new Uint8Array(32))
      expect(await p.x25519(a, b)).toEqual(await other.x25519(a, b))
    }
  })
  it('typed errors: short sealed data, wrong key', async () => {
    await expect(p.aesGcmOpen(new Uint8Array(32), new Uint8Array(12), new Uint8Array(5))).rejects.toBeInstanceOf(TagMismatchError)
    const sealed = await p.aesGcmSeal(new Uint8Array(32), new Uint8Array(12), new Uint8Array(10))
    await expect(p.aesGcmOpen(new Uint8Array(32).fill(1), new Uint8Array(12), sealed)).rejects.toBeInstanceOf(TagMismatchError)
    await expect(p.x25519(new Uint8Array(32).fill(3), new Uint8Array(32))).rejects.toBeInstanceOf(WeakPublicKeyError)
  })
})
