import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { describe, expect, it } from 'vitest'
import { BadReceiptError, ReceiptLedger } from '../../client/index.js'
import { sha256, signReceipt } from '../../protocol/index.js'

async function hop(start: number, end: number) {
  const key = await generateKeyPair('Ed25519')
  return { key, peerId: peerIdFromPrivateKey(key).toString(), start, end }
}

describe('receipt ledger', () => {
  it('accepts a chain of receipts from input to output and rejects every break in it', async () => {
    const [a, b] = [await hop(1, 2), await hop(2, 4)]
    const sent = new Uint8Array([1, 2, 3])
    const mid = new Uint8Array([4, 5])
    const got = new Uint8Array([6])
    const ra = await signReceipt(
      {
        sessionId: 's',
        stepId: 1,
        position: 4,
        modelId: 'm',
        start: 1,
        end: 2,
        inputHash: sha256(sent),
        outputHash: sha256(mid)
      },
      a.peerId,
      a.key
    )
    const rb = await signReceipt(
      { sessionId: 's', stepId: 1, position: 4, modelId: 'm', start: 2, end: 4, inputHash: sha256(mid), outputHash: sha256(got) },
      b.peerId,
      b.key
    )
    const ledger = new ReceiptLedger('m')
    await ledger.check([a, b], { sessionId: 's', stepId: 1, position: 4 }, [ra, rb], sent, got)
    expect(ledger.summary()).toMatchObject({ checked: 2, invalid: 0 })
    expect(ledger.evidence(a.peerId)[0].receipt).toBe(ra)

    const bad = async (receipts: (typeof ra)[], received = got, stepId = 1, position = 4, modelId = 'm') => {
      const err = await new ReceiptLedger(modelId)
        .check([a, b], { sessionId: 's', stepId, position }, receipts, sent, received)
        .catch((e) => e)
      expect(err).toBeInstanceOf(BadReceiptError)
      return (err as BadReceiptError).peerId
    }
    expect(await bad([ra])).toBe(b.peerId) // missing
    expect(await bad([ra, rb], new Uint8Array([7]))).toBe(b.peerId) // answered something else than it signed
    expect(await bad([rb, ra])).toBe(a.peerId) // out of order
    expect(await bad([ra, { ...rb, signature: ra.signature }])).toBe(b.peerId) // forged signature
    expect(await bad([ra, rb], got, 2)).toBe(a.peerId) // replayed from another step
    // issue #39: a receipt replayed for another position or another model is refused
    expect(await bad([ra, rb], got, 1, 5)).toBe(a.peerId)
    expect(await bad([ra, rb], got, 1, 4, 'other-model')).toBe(a.peerId)
  })
})
