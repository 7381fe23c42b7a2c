import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { describe, expect, it } from 'vitest'
import {
  decodeKvMoveRequest,
  decodeKvMoveResponse,
  encodeKvMoveRequest,
  encodeKvMoveResponse,
  type KvGrantFields,
  signKvGrant,
  signKvReceipt,
  verifyKvGrant,
  verifyKvReceipt
} from '../../protocol/index.js'

async function fields(): Promise<{ f: KvGrantFields; key: Awaited<ReturnType<typeof generateKeyPair>> }> {
  const key = await generateKeyPair('Ed25519')
  const f: KvGrantFields = {
    grantId: new Uint8Array(16).fill(7),
    clientPeerId: peerIdFromPrivateKey(key).toString(),
    sourcePeerId: 'src',
    destinationPeerId: 'dst',
    modelId: 'lsm1-x',
    sourceSessionId: 'a',
    destinationSessionId: 'b',
    start: 1,
    end: 4,
    fromPosition: 0,
    toPosition: 8,
    prefixHash: new Uint8Array(32).fill(1),
    expiresAtMs: 1_800_000_000_000,
    wrappedKeyHash: new Uint8Array(32).fill(2)
  }
  return { f, key }
}

describe('KV grants and receipts (issue #41)', () => {
  it('a grant verifies as signed and not with any field changed or another signer', async () => {
    const { f, key } = await fields()
    const g = await signKvGrant(f, key)
    expect(await verifyKvGrant(g)).toBe(true)
    for (const changed of [
      { ...g, destinationPeerId: 'other' },
      { ...g, sourcePeerId: 'other' },
      { ...g, start: 2 },
      { ...g, toPosition: 9 },
      { ...g, expiresAtMs: g.expiresAtMs + 1 },
      { ...g, grantId: new Uint8Array(16).fill(8) }
    ])
      expect(await verifyKvGrant(changed)).toBe(false)
    const other = await signKvGrant(f, await generateKeyPair('Ed25519'))
    expect(await verifyKvGrant(other)).toBe(false)
  })

  it('a grant round-trips the wire in a push; a receipt in a response; a receipt is not a grant', async () => {
    const { f, key } = await fields()
    const grant = await signKvGrant(f, key)
    const push = {
      grant,
      wrappedKey: new Uint8Array(80).fill(3),
      firstSequence: 1,
      chunkEnds: [4, 8],
      chunkPrefixHashes: [new Uint8Array(32), f.prefixHash]
    }
    const back = decodeKvMoveRequest(encodeKvMoveRequest({ type: 'push', push }))
    expect(back.type === 'push' && (await verifyKvGrant(back.push.grant))).toBe(true)
    const receipt = await signKvReceipt(
      { grantId: f.grantId, destinationPeerId: f.clientPeerId, destinationSessionId: 'b', length: 8, sequence: 2, bytes: 100 },
      key
    )
    const r = decodeKvMoveResponse(encodeKvMoveResponse({ type: 'receipt', receipt }))
    expect(r.type === 'receipt' && (await verifyKvReceipt(r.receipt))).toBe(true)
    expect(await verifyKvReceipt({ ...receipt, length: 9 })).toBe(false)
  })

  it('a push with an empty range or mismatched chunk hashes is MALFORMED', async () => {
    const { f, key } = await fields()
    const grant = await signKvGrant({ ...f, toPosition: 0 }, key)
    const push = { grant, wrappedKey: new Uint8Array(8), firstSequence: 1, chunkEnds: [8], chunkPrefixHashes: [f.prefixHash] }
    expect(() => decodeKvMoveRequest(encodeKvMoveRequest({ type: 'push', push }))).toThrow(
      expect.objectContaining({ code: 'MALFORMED' })
    )
    const ok = await signKvGrant(f, key)
    const bad = { ...push, grant: ok, chunkPrefixHashes: [] }
    expect(() => decodeKvMoveRequest(encodeKvMoveRequest({ type: 'push', push: bad }))).toThrow(
      expect.objectContaining({ code: 'MALFORMED' })
    )
  })
})
