import { generateKeyPairFromSeed } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { describe, expect, it } from 'vitest'
import { CanaryArgumentError } from '../../canary/index.js'
import { BadReceiptError, ReceiptLedger, ReplayIndex, verifyReplayEvidence } from '../../client/index.js'
import { createTamper } from '../../node/daemon/tamper.js'
import { sha256, signReceipt } from '../../protocol/index.js'

/** A hop with a fixed Ed25519 key (seed byte `n`), so its peer id and signatures are known vectors. */
async function hop(n: number, start = 1, end = 4) {
  const key = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(n))
  return { key, peerId: peerIdFromPrivateKey(key).toString(), start, end }
}
type Hop = Awaited<ReturnType<typeof hop>>

const MODEL = 'model-under-test'
const bytes = (...v: number[]): Uint8Array => new Uint8Array(v)

/** One relayed step of `h` through a ledger: it signs what it got and what it answers. */
async function step(ledger: ReceiptLedger, h: Hop, sessionId: string, stepId: number, sent: Uint8Array, answered: Uint8Array) {
  const r = await signReceipt(
    {
      sessionId,
      stepId,
      position: stepId,
      modelId: MODEL,
      start: h.start,
      end: h.end,
      inputHash: sha256(sent),
      outputHash: sha256(answered)
    },
    h.peerId,
    h.key
  )
  await ledger.check([h], { sessionId, stepId, position: stepId }, [r], sent, answered)
  return r
}

describe('replay proven by receipts', () => {
  it('known vectors: a fixed seed gives a fixed peer id, and its receipts verify', async () => {
    const a = await hop(1)
    // Ed25519 from a 32-byte seed of 0x01 (RFC 8032 key generation): the peer id is a function of it
    expect(a.peerId).toBe('12D3KooWK99VoVxNE7XzyBwXEzW7xhK7Gpv85r9F3V3fyKSUKPH5')
    expect((await hop(2)).peerId).not.toBe(a.peerId)
  })

  it('convicts a peer that signs one output for two different inputs, with both receipts as evidence', async () => {
    const a = await hop(1)
    const replays = new ReplayIndex()
    const ledger = new ReceiptLedger(MODEL, replays)
    const first = await step(ledger, a, 's1', 1, bytes(1, 2, 3), bytes(9, 9, 9))
    await step(ledger, a, 's1', 2, bytes(4, 5, 6), bytes(8, 8, 8))
    expect(replays.takeConvicted()).toEqual([])
    // step 3 answers step 1's output again for another input
    const again = await step(ledger, a, 's1', 3, bytes(7, 7, 7), bytes(9, 9, 9))
    expect(replays.takeConvicted()).toEqual([a.peerId])
    expect(replays.takeConvicted()).toEqual([]) // handed to the exclusion path once
    expect(replays.isConvicted(a.peerId)).toBe(true)
    const [e] = replays.evidence
    expect(e).toMatchObject({
      peerId: a.peerId,
      why: 'replayed-output',
      original: { sessionId: 's1', stepId: 1 },
      replayed: { sessionId: 's1', stepId: 3 }
    })
    expect(e.original.receipt).toBe(first)
    expect(e.replayed.receipt).toBe(again)
    expect(await verifyReplayEvidence(e)).toBe(true)
    // evidence that does not hold up: another input hash made equal, a signature swapped, another peer
    expect(
      await verifyReplayEvidence({ ...e, replayed: { ...e.replayed, receipt: { ...again, inputHash: first.inputHash } } })
    ).toBe(false)
    expect(
      await verifyReplayEvidence({ ...e, replayed: { ...e.replayed, receipt: { ...again, signature: first.signature } } })
    ).toBe(false)
    expect(await verifyReplayEvidence({ ...e, replayed: { ...e.replayed, stepId: 4 } })).toBe(false)
    expect(await verifyReplayEvidence({ ...e, peerId: (await hop(2)).peerId })).toBe(false)
    // a later collision adds no second conviction
    await step(ledger, a, 's2', 1, bytes(6, 6), bytes(8, 8, 8))
    expect(replays.takeConvicted()).toEqual([])
    expect(replays.evidence).toHaveLength(1)
  })

  it('does not count equal outputs of equal inputs: a retried step, a re-sent canary, a failover replay', async () => {
    const a = await hop(1)
    const replays = new ReplayIndex()
    const ledger = new ReceiptLedger(MODEL, replays)
    await step(ledger, a, 's1', 1, bytes(1, 2), bytes(3, 4))
    await step(ledger, a, 's1', 1, bytes(1, 2), bytes(3, 4)) // the same step retried
    await step(ledger, a, 'decoy-2', 7, bytes(1, 2), bytes(3, 4)) // a decoy re-sending the canary's rows
    await step(ledger, a, 's1.2', 1, bytes(1, 2), bytes(3, 4)) // a failover replaying them on a new hop session
    expect(replays.takeConvicted()).toEqual([])
    expect(replays.evidence).toEqual([])
  })

  it('does not count equal outputs of different spans: one prompt through [2, 4) and later [3, 4) of one peer', async () => {
    // A peer serving [2, 5) is routed for [2, 4) in one session and [3, 4) in the next (routes
    // split spans by load): the same prompt ends in the same hidden state from different inputs.
    const wide = await hop(1, 2, 4)
    const narrow = { ...wide, start: 3 }
    const replays = new ReplayIndex()
    const ledger = new ReceiptLedger(MODEL, replays)
    await step(ledger, wide, 's1', 1, bytes(1, 2), bytes(7, 8))
    await step(ledger, narrow, 's2', 1, bytes(5, 6), bytes(7, 8))
    expect(replays.takeConvicted()).toEqual([])
    // the same span answering another input with that output is still a replay
    await step(ledger, narrow, 's3', 1, bytes(9, 9), bytes(7, 8))
    expect(replays.takeConvicted()).toEqual([wide.peerId])
  })

  it('keeps outputs per peer: two peers answering the same bytes for different inputs convict neither', async () => {
    const [a, b] = [await hop(1, 1, 2), await hop(2, 1, 2)]
    const replays = new ReplayIndex()
    const ledger = new ReceiptLedger(MODEL, replays)
    await step(ledger, a, 's1', 1, bytes(1), bytes(5))
    await step(ledger, b, 's2', 1, bytes(2), bytes(5))
    expect(replays.takeConvicted()).toEqual([])
  })

  it('only verified receipts reach the index, and it remembers the last `window` outputs', async () => {
    const a = await hop(1)
    const replays = new ReplayIndex(2)
    const ledger = new ReceiptLedger(MODEL, replays)
    const r = await step(ledger, a, 's', 1, bytes(1), bytes(9))
    // a receipt with a broken signature is rejected before the index sees it
    const forged = { ...r, inputHash: sha256(bytes(2)) }
    await expect(
      ledger.check([a], { sessionId: 's', stepId: 2, position: 2 }, [forged], bytes(2), bytes(9))
    ).rejects.toBeInstanceOf(BadReceiptError)
    expect(replays.takeConvicted()).toEqual([])
    // two newer outputs push the first out of a window of 2: its replay goes unseen (the bound)
    await step(ledger, a, 's', 3, bytes(3), bytes(10))
    await step(ledger, a, 's', 4, bytes(4), bytes(11))
    await step(ledger, a, 's', 5, bytes(5), bytes(9))
    expect(replays.takeConvicted()).toEqual([])
    await step(ledger, a, 's', 6, bytes(6), bytes(11)) // still in the window
    expect(replays.takeConvicted()).toEqual([a.peerId])
    expect(() => new ReplayIndex(0)).toThrow(CanaryArgumentError)
  })

  it("the node's replay tamper mode is convicted on its first replayed step (real tamper function, real signatures)", async () => {
    const a = await hop(3)
    const tamper = createTamper({ mode: 'replay', size: 1, rate: 1, seed: 7 })
    const replays = new ReplayIndex()
    const ledger = new ReceiptLedger(MODEL, replays)
    const row = (k: number) => Float32Array.from({ length: 64 }, (_, i) => Math.sin(k * 31 + i))
    const asBytes = (x: Float32Array) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength)
    let convictedAt = 0
    for (let stepId = 1; stepId <= 4 && convictedAt === 0; stepId++) {
      const input = row(stepId)
      const output = tamper.apply({ sessionId: 's', stepId, input, output: row(100 + stepId) })
      await step(ledger, a, 's', stepId, asBytes(input), asBytes(output))
      if (replays.takeConvicted().includes(a.peerId)) convictedAt = stepId
    }
    // step 1 has nothing to replay (answered honestly); step 2 returns step 1's output
    expect(convictedAt).toBe(2)
    expect(await verifyReplayEvidence(replays.evidence[0])).toBe(true)
  })
})
