import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { describe, expect, it } from 'vitest'
import { receiptPayload, sha256, signReceipt, verifyReceipt } from '../../protocol/index.js'

describe('step receipts', () => {
  it('sign and verify; any changed field or another key fails', async () => {
    const key = await generateKeyPair('Ed25519')
    const peerId = peerIdFromPrivateKey(key).toString()
    const fields = {
      sessionId: 's-1',
      stepId: 7,
      start: 2,
      end: 4,
      inputHash: sha256(new Uint8Array([1, 2])),
      outputHash: sha256(new Uint8Array([3]))
    }
    const r = await signReceipt(fields, peerId, key)
    expect(await verifyReceipt(r, 's-1', 7)).toBe(true)
    expect(await verifyReceipt(r, 's-2', 7)).toBe(false)
    expect(await verifyReceipt(r, 's-1', 8)).toBe(false)
    expect(await verifyReceipt({ ...r, end: 5 }, 's-1', 7)).toBe(false)
    expect(await verifyReceipt({ ...r, outputHash: sha256(new Uint8Array([4])) }, 's-1', 7)).toBe(false)
    const other = peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString()
    expect(await verifyReceipt({ ...r, peerId: other }, 's-1', 7)).toBe(false)
    expect(await verifyReceipt({ ...r, peerId: 'not-a-peer-id' }, 's-1', 7)).toBe(false)
  })

  it('the payload is domain-separated and fixed-width', () => {
    const f = {
      sessionId: 'ab',
      stepId: 1,
      start: 0,
      end: 1,
      inputHash: new Uint8Array(32),
      outputHash: new Uint8Array(32).fill(1)
    }
    const p = receiptPayload(f)
    expect(new TextDecoder().decode(p.subarray(0, 22))).toBe('layerswarm-receipt:v1\n')
    expect(p.length).toBe(22 + 4 + 2 + 16 + 64)
    // moving a byte between session id and step id cannot produce the same payload
    expect(Buffer.from(receiptPayload({ ...f, sessionId: 'a' })).equals(Buffer.from(p))).toBe(false)
  })
})
