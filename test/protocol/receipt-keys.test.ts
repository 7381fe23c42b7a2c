import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id'
import { describe, expect, it } from 'vitest'
import { receiptPayload, sha256, signReceipt, verifyReceipt } from '../../protocol/index.js'

// protocol/receipt.ts signs and checks with cached node:crypto keys: the bytes must be exactly
// what libp2p's own Ed25519 code makes and accepts, in both directions.
const at = (stepId: number) => ({ sessionId: 'sess', stepId, position: 3, modelId: 'model' })

describe('receipt keys (node:crypto fast path)', () => {
  const fields = (stepId: number) => ({
    sessionId: 'sess',
    stepId,
    position: 3,
    modelId: 'model',
    start: 1,
    end: 7,
    inputHash: sha256(new Uint8Array([stepId])),
    outputHash: sha256(new Uint8Array([stepId, 1]))
  })

  it('signatures equal libp2p ones and verify under libp2p, repeatedly with the cached key', async () => {
    const key = await generateKeyPair('Ed25519')
    const peerId = peerIdFromPrivateKey(key).toString()
    const libp2pKey = peerIdFromString(peerId).publicKey!
    for (let step = 1; step <= 3; step++) {
      const r = await signReceipt(fields(step), peerId, key)
      expect(Buffer.from(r.signature).equals(Buffer.from(await key.sign(receiptPayload(fields(step)))))).toBe(true)
      expect(await libp2pKey.verify(receiptPayload(fields(step)), r.signature)).toBe(true)
      expect(await verifyReceipt(r, at(step))).toBe(true)
    }
  })

  it('rejects a flipped bit, a truncated signature and a signature by another key', async () => {
    const key = await generateKeyPair('Ed25519')
    const peerId = peerIdFromPrivateKey(key).toString()
    const r = await signReceipt(fields(5), peerId, key)
    const flipped = new Uint8Array(r.signature)
    flipped[10] ^= 1
    expect(await verifyReceipt({ ...r, signature: flipped }, at(5))).toBe(false)
    expect(await verifyReceipt({ ...r, signature: r.signature.subarray(0, 63) }, at(5))).toBe(false)
    expect(await verifyReceipt({ ...r, signature: new Uint8Array(0) }, at(5))).toBe(false)
    const other = await generateKeyPair('Ed25519')
    const forged = await signReceipt(fields(5), peerId, other)
    expect(await verifyReceipt(forged, at(5))).toBe(false)
  })

  it('a secp256k1 identity still signs and verifies through libp2p', async () => {
    const key = await generateKeyPair('secp256k1')
    const peerId = peerIdFromPrivateKey(key).toString()
    const r = await signReceipt(fields(2), peerId, key)
    expect(await verifyReceipt(r, at(2))).toBe(true)
    expect(await verifyReceipt(r, at(3))).toBe(false)
  })
})
