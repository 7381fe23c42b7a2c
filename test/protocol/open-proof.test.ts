/**
 * Issue #39's proof of work on open: difficulty by load, binding to node, client, session and
 * epoch, and the proof fields on the wire.
 */
import { describe, expect, it } from 'vitest'
import {
  checkOpenProof,
  decodeInfoResponse,
  decodeSessionRequest,
  encodeInfoResponse,
  encodeSessionRequest,
  OPEN_PROOF_EPOCH_MS,
  OPEN_PROOF_MAX_BITS,
  openProofBits,
  ProofRequiredError,
  solveOpenProof
} from '../../protocol/index.js'

const input = { nodePeerId: '12D3KooWNode', clientPeerId: '12D3KooWClient', sessionId: 's1' }
const NOW = 1_700_000_000_000

describe('open proof of work (issue #39)', () => {
  it('asks nothing below half load, then more bits up to the cap', () => {
    expect(openProofBits(0, 16)).toBe(0)
    expect(openProofBits(7, 16)).toBe(0)
    expect(openProofBits(8, 16)).toBeGreaterThan(0)
    expect(openProofBits(12, 16)).toBeGreaterThan(openProofBits(8, 16))
    expect(openProofBits(16, 16)).toBe(OPEN_PROOF_MAX_BITS)
  })

  it('accepts a solved proof in its epoch and the next; refuses it elsewhere with PROOF_REQUIRED', () => {
    const proof = solveOpenProof(input, 10, NOW)
    checkOpenProof(input, 10, proof, NOW)
    checkOpenProof(input, 10, proof, NOW + OPEN_PROOF_EPOCH_MS)
    checkOpenProof(input, 0, {}, NOW) // an idle node asks nothing
    expect(() => checkOpenProof(input, 10, {}, NOW)).toThrow(ProofRequiredError)
    expect(() => checkOpenProof(input, 10, proof, NOW + 2 * OPEN_PROOF_EPOCH_MS)).toThrow(/stale/)
    // bound to the node, the client and the session (a 16-bit proof passes for another input with probability 2^-16)
    const strong = solveOpenProof(input, 16, NOW)
    for (const other of [
      { ...input, nodePeerId: '12D3KooWOther' },
      { ...input, clientPeerId: '12D3KooWSybil' },
      { ...input, sessionId: 's2' }
    ])
      expect(() => checkOpenProof(other, 16, strong, NOW)).toThrow(ProofRequiredError)
  })

  it('carries the proof and the asked bits on the wire', () => {
    const open = {
      sessionId: 's1',
      modelId: 'm',
      start: 0,
      end: 1,
      maxLength: 8,
      wireDtype: 'f32' as const,
      nextHops: [],
      proofEpoch: 56_666_666,
      proofNonce: 4_000_000_000
    }
    const back = decodeSessionRequest(encodeSessionRequest({ requestId: 1, type: 'open', open }))
    expect(back).toMatchObject({ type: 'open', open: { proofEpoch: 56_666_666, proofNonce: 4_000_000_000 } })
    const info = {
      modelId: 'm',
      version: '1',
      nLayers: 2,
      dim: 8,
      start: 0,
      end: 1,
      throughput: 1,
      freeCacheTokens: 1,
      maxSessions: 16,
      activeSessions: 12,
      wireDtypes: ['f32' as const],
      x25519PublicKey: new Uint8Array(0),
      openProofBits: 14
    }
    expect(decodeInfoResponse(encodeInfoResponse(info)).openProofBits).toBe(14)
  })
})
