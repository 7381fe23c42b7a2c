/**
 * Signed step receipts (DESIGN.md §5): a hop signs, with its libp2p Ed25519 key,
 * Sign(domain ‖ sessionId ‖ stepId ‖ span ‖ H(input) ‖ H(output)), H = SHA-256 over the
 * tensor data bytes exactly as they travelled. A receipt for a tampered output is evidence
 * anyone can check against the peer id alone (Ed25519 peer ids embed the public key).
 */
import { createHash } from 'node:crypto'
import type { PrivateKey } from '@libp2p/interface'
import { peerIdFromString } from '@libp2p/peer-id'
import type { Receipt } from './types.js'

export const RECEIPT_SIGNATURE_DOMAIN = new TextEncoder().encode('layerswarm-receipt:v1\n')

export interface ReceiptFields {
  readonly sessionId: string
  readonly stepId: number
  readonly start: number
  readonly end: number
  readonly inputHash: Uint8Array
  readonly outputHash: Uint8Array
}

export function sha256(data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(data).digest())
}

/** The exact bytes signed: fixed-width fields after a domain tag, so no two receipts collide. */
export function receiptPayload(f: ReceiptFields): Uint8Array {
  const sid = new TextEncoder().encode(f.sessionId)
  const out = new Uint8Array(RECEIPT_SIGNATURE_DOMAIN.length + 4 + sid.length + 8 + 8 + 64)
  const dv = new DataView(out.buffer)
  let o = 0
  out.set(RECEIPT_SIGNATURE_DOMAIN, o)
  o += RECEIPT_SIGNATURE_DOMAIN.length
  dv.setUint32(o, sid.length)
  out.set(sid, o + 4)
  o += 4 + sid.length
  dv.setBigUint64(o, BigInt(f.stepId))
  dv.setUint32(o + 8, f.start)
  dv.setUint32(o + 12, f.end)
  o += 16
  out.set(f.inputHash, o)
  out.set(f.outputHash, o + 32)
  return out
}

export async function signReceipt(f: ReceiptFields, peerId: string, privateKey: PrivateKey): Promise<Receipt> {
  const signature = await privateKey.sign(receiptPayload(f))
  return { peerId, start: f.start, end: f.end, inputHash: f.inputHash, outputHash: f.outputHash, signature }
}

/** True when the receipt is `peerId`'s signature over these fields. */
export async function verifyReceipt(r: Receipt, sessionId: string, stepId: number): Promise<boolean> {
  try {
    const key = peerIdFromString(r.peerId).publicKey
    if (!key) return false
    const payload = receiptPayload({ sessionId, stepId, start: r.start, end: r.end, inputHash: r.inputHash, outputHash: r.outputHash })
    return await key.verify(payload, r.signature)
  } catch {
    return false
  }
}
