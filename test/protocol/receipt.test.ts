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
      position: 11,
      modelId: 'm-1',
      start: 2,
      end: 4,
      inputHash: sha256(new Uint8Array([1, 2])),
      outputHash: sha256(new Uint8Array([3]))
    }
    const r = await signReceipt(fields, peerId, key)
    const at = { sessionId: 's-1', stepId: 7, position: 11, modelId: 'm-1' }
    expect(await verifyReceipt(r, at)).toBe(true)
    expect(await verifyReceipt(r, { ...at, sessionId: 's-2' })).toBe(false)
    expect(await verifyReceipt(r, { ...at, stepId: 8 })).toBe(false)
    // issue #39: bound to the step's position and the model
    expect(await verifyReceipt(r, { ...at, position: 12 })).toBe(false)
    expect(await verifyReceipt(r, { ...at, modelId: 'm-2' })).toBe(false)
    expect(await verifyReceipt({ ...r, end: 5 }, at)).toBe(false)
    expect(await verifyReceipt({ ...r, outputHash: sha256(new Uint8Array([4])) }, at)).toBe(false)
    const other = peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString()
    expect(await verifyReceipt({ ...r, peerId: other }, at)).toBe(false)
    expect(await verifyReceipt({ ...r, peerId: 'not-a-peer-id' }, at)).toBe(false)
  })

  it('the payload is domain-separated and fixed-width', () => {
    const f = {
      sessionId: 'ab',
      stepId: 1,
      position: 5,
      modelId: 'mm',
      start: 0,
      end: 1,
      inputHash: new Uint8Array(32),
      outputHash: new Uint8Array(32).fill(1)
    }
    const p = receiptPayload(f)
    expect(new TextDecoder().decode(p.subarray(0, 22))).toBe('layerswarm-receipt:v2\n')
    expect(p.length).toBe(22 + 4 + 2 + 16 + 4 + 4 + 2 + 64)
    // moving a byte between session id and step id cannot produce the same payload
    expect(Buffer.from(receiptPayload({ ...f, sessionId: 'a' })).equals(Buffer.from(p))).toBe(false)
    // nor between the model id and the hashes
    expect(Buffer.from(receiptPayload({ ...f, modelId: 'm' })).equals(Buffer.from(p))).toBe(false)
  })
})
