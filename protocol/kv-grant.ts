/**
 * KV grants and KV receipts (issue #41). A grant is the client's permission for one source peer
 * to send one destination peer the sealed KV of one span's positions [from, to), until an expiry;
 * a receipt is the destination's signature over what it then holds, which the client checks.
 *
 * Who signs the grant: the client's libp2p identity key (Ed25519), not a session key. The
 * destination session's owner is that identity (Noise authenticated it at open), so a destination
 * checks the grant against the owner it already knows, with the public key the peer id embeds and
 * no shared state; the source can check it too before it seals anything; and a grant, like a
 * receipt, is evidence any third party can verify. A MAC under the session's hop key would bind
 * only client and destination, and the source could not tell a forged one from a real one.
 *
 * Both are signed over fixed-layout bytes after a domain tag (as receipts, receipt.ts), so no
 * grant verifies as a receipt or as a grant with other fields.
 */
import type { PrivateKey } from '@libp2p/interface'
import { sha256, signPayload, verifyPayload } from './receipt.js'

export const KV_GRANT_DOMAIN = new TextEncoder().encode('layerswarm-kv-grant:v1\n')
export const KV_RECEIPT_DOMAIN = new TextEncoder().encode('layerswarm-kv-receipt:v1\n')
/** A grant is short-lived: a destination refuses one that expires further ahead than this. */
export const MAX_KV_GRANT_LIFETIME_MS = 120_000
/** What the client gives a grant by default: long enough for a slow first seal and transfer. */
export const DEFAULT_KV_GRANT_LIFETIME_MS = 60_000
export const KV_GRANT_ID_BYTES = 16

export interface KvGrantFields {
  readonly grantId: Uint8Array
  readonly clientPeerId: string
  readonly sourcePeerId: string
  readonly destinationPeerId: string
  readonly modelId: string
  readonly sourceSessionId: string
  readonly destinationSessionId: string
  readonly start: number
  readonly end: number
  readonly fromPosition: number
  readonly toPosition: number
  /** SHA-256 of the client's input rows [0, toPosition) as f32 (as a snapshot's prefix hash). */
  readonly prefixHash: Uint8Array
  readonly expiresAtMs: number
  /** SHA-256 of the snapshot key as the client wrapped it for the destination. */
  readonly wrappedKeyHash: Uint8Array
}

export interface KvGrant extends KvGrantFields {
  readonly signature: Uint8Array
}

export interface KvReceiptFields {
  readonly grantId: Uint8Array
  readonly destinationPeerId: string
  readonly destinationSessionId: string
  /** Positions the destination session holds after the transfer. */
  readonly length: number
  /** The last sealed sequence it imported. */
  readonly sequence: number
  /** Sealed bytes it received under the grant. */
  readonly bytes: number
}

export interface KvReceipt extends KvReceiptFields {
  readonly signature: Uint8Array
}

class Writer {
  private readonly parts: Uint8Array[] = []
  bytes(b: Uint8Array): this {
    const len = new Uint8Array(4)
    new DataView(len.buffer).setUint32(0, b.length)
    this.parts.push(len, b)
    return this
  }
  text(s: string): this {
    return this.bytes(new TextEncoder().encode(s))
  }
  u64(n: number): this {
    const b = new Uint8Array(8)
    new DataView(b.buffer).setBigUint64(0, BigInt(n))
    this.parts.push(b)
    return this
  }
  done(domain: Uint8Array): Uint8Array {
    const out = new Uint8Array(domain.length + this.parts.reduce((a, p) => a + p.length, 0))
    out.set(domain)
    let o = domain.length
    for (const p of this.parts) {
      out.set(p, o)
      o += p.length
    }
    return out
  }
}

/** The exact bytes a grant's signature covers: every field, length-prefixed, after the domain tag. */
export function kvGrantPayload(g: KvGrantFields): Uint8Array {
  return new Writer()
    .bytes(g.grantId)
    .text(g.clientPeerId)
    .text(g.sourcePeerId)
    .text(g.destinationPeerId)
    .text(g.modelId)
    .text(g.sourceSessionId)
    .text(g.destinationSessionId)
    .u64(g.start)
    .u64(g.end)
    .u64(g.fromPosition)
    .u64(g.toPosition)
    .bytes(g.prefixHash)
    .u64(g.expiresAtMs)
    .bytes(g.wrappedKeyHash)
    .done(KV_GRANT_DOMAIN)
}

export function kvReceiptPayload(r: KvReceiptFields): Uint8Array {
  return new Writer()
    .bytes(r.grantId)
    .text(r.destinationPeerId)
    .text(r.destinationSessionId)
    .u64(r.length)
    .u64(r.sequence)
    .u64(r.bytes)
    .done(KV_RECEIPT_DOMAIN)
}

/** The client signs a grant with its identity key (its peer id is `fields.clientPeerId`). */
export async function signKvGrant(fields: KvGrantFields, privateKey: PrivateKey): Promise<KvGrant> {
  return { ...fields, signature: await signPayload(kvGrantPayload(fields), privateKey) }
}

/** True when the grant carries its client's signature over exactly these fields. */
export async function verifyKvGrant(g: KvGrant): Promise<boolean> {
  return await verifyPayload(kvGrantPayload(g), g.signature, g.clientPeerId)
}

export async function signKvReceipt(fields: KvReceiptFields, privateKey: PrivateKey): Promise<KvReceipt> {
  return { ...fields, signature: await signPayload(kvReceiptPayload(fields), privateKey) }
}

/** True when the receipt carries its destination's signature (destinationPeerId) over its fields. */
export async function verifyKvReceipt(r: KvReceipt): Promise<boolean> {
  return await verifyPayload(kvReceiptPayload(r), r.signature, r.destinationPeerId)
}

/** What a grant binds the wrapped key by. */
export function wrappedKeyHash(wrappedKey: Uint8Array): Uint8Array {
  return sha256(wrappedKey)
}

/**
 * The destination session of a grant to a holder (issue #41 item 3): the destination keeps the
 * sealed frames for the client, unopened (node/daemon/kv/kv-hold.ts), instead of importing them.
 * Signed with the rest of the grant, so a source cannot turn an import into a hold or back.
 */
export const KV_HOLD_SESSION_ID = 'kv-hold'

/** What a grant to a holder names as the wrapped key: none is wrapped for a holder, it never opens what it keeps. */
export const KV_HOLD_NO_KEY = new TextEncoder().encode('layerswarm-kv-hold:no-key')

export function isKvHold(g: Pick<KvGrantFields, 'destinationSessionId'>): boolean {
  return g.destinationSessionId === KV_HOLD_SESSION_ID
}
