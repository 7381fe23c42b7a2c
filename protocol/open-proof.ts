/**
 * A proof of work on session open (issue #39): a client proves it is a client at a cost that
 * rises with the node's load. Peer ids cost nothing, so per-id limits alone let fresh identities
 * take every slot; a proof makes each open cost hashes exactly when slots are scarce, and costs
 * an honest user nothing on a node that is not busy.
 *
 * The proof is a nonce such that SHA-256(domain ‖ node peer id ‖ client peer id ‖ session id ‖
 * epoch ‖ nonce) has `bits` leading zero bits. It is bound to the node (no reuse elsewhere), the
 * client (no reuse by another identity), the session id (one proof, one session at a time) and a
 * 30 s epoch (the node accepts the current and the previous one, so no node state is needed and
 * proofs cannot be stockpiled). The node checks one hash, before any other open check.
 */
import { createHash } from 'node:crypto'
import { ProofRequiredError } from './errors.js'

export const OPEN_PROOF_DOMAIN = 'layerswarm-open-proof:v1\n'
/** Milliseconds of one proof epoch; a proof of this or the previous epoch is accepted. */
export const OPEN_PROOF_EPOCH_MS = 30_000
/** Bits asked once the node holds half its sessions, and at its cap (about 2^20 hashes: well under a second). */
export const OPEN_PROOF_MIN_BITS = 8
export const OPEN_PROOF_MAX_BITS = 20

export interface OpenProofInput {
  readonly nodePeerId: string
  readonly clientPeerId: string
  readonly sessionId: string
}

export interface OpenProof {
  readonly proofEpoch: number
  readonly proofNonce: number
}

/** The epoch of time `nowMs`. */
export function openProofEpoch(nowMs: number): number {
  return Math.floor(nowMs / OPEN_PROOF_EPOCH_MS)
}

/**
 * Bits a node asks for with `active` of `maxSessions` sessions open: none below half, then
 * rising linearly from OPEN_PROOF_MIN_BITS to OPEN_PROOF_MAX_BITS at the cap.
 */
export function openProofBits(active: number, maxSessions: number): number {
  if (maxSessions <= 0 || active * 2 < maxSessions) return 0
  const f = Math.min(1, (active * 2 - maxSessions) / maxSessions)
  return Math.round(OPEN_PROOF_MIN_BITS + f * (OPEN_PROOF_MAX_BITS - OPEN_PROOF_MIN_BITS))
}

function prefix(input: OpenProofInput): Buffer {
  return Buffer.from(`${OPEN_PROOF_DOMAIN}${input.nodePeerId}\n${input.clientPeerId}\n${input.sessionId}\n`)
}

function leadingZeroBits(d: Buffer): number {
  let n = 0
  for (const byte of d) {
    if (byte === 0) {
      n += 8
      continue
    }
    return n + Math.clz32(byte) - 24
  }
  return n
}

function digest(head: Buffer, epoch: number, nonce: number): Buffer {
  const tail = Buffer.alloc(8)
  tail.writeUInt32BE(epoch >>> 0, 0)
  tail.writeUInt32BE(nonce >>> 0, 4)
  return createHash('sha256').update(head).update(tail).digest()
}

/** Find a proof of `bits` for `input` at time `nowMs` (about 2^bits hashes). */
export function solveOpenProof(input: OpenProofInput, bits: number, nowMs = Date.now()): OpenProof {
  const proofEpoch = openProofEpoch(nowMs)
  const head = prefix(input)
  for (let nonce = 0; nonce <= 0xffffffff; nonce++) {
    if (leadingZeroBits(digest(head, proofEpoch, nonce)) >= bits) return { proofEpoch, proofNonce: nonce }
  }
  throw new RangeError(`no proof of ${bits} bits in 2^32 nonces`)
}

/** Throws ProofRequiredError unless `proof` meets `bits` for `input` in this or the previous epoch. */
export function checkOpenProof(input: OpenProofInput, bits: number, proof: Partial<OpenProof>, nowMs = Date.now()): void {
  if (bits <= 0) return
  const { proofEpoch, proofNonce } = proof
  const epoch = openProofEpoch(nowMs)
  const ask = `this node asks a proof of work of ${bits} bits on open (its info's open_proof_bits)`
  if (proofEpoch === undefined || proofNonce === undefined) throw new ProofRequiredError(ask)
  if (proofEpoch !== epoch && proofEpoch !== epoch - 1) throw new ProofRequiredError(`${ask}; the proof's epoch is stale`)
  if (leadingZeroBits(digest(prefix(input), proofEpoch, proofNonce)) < bits)
    throw new ProofRequiredError(`${ask}; the proof falls short`)
}
