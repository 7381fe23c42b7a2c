/**
 * What a destination checks before it stores a byte of KV a source sends it (issue #41 item 4):
 * one coded error per refusal, in this order, each before anything is kept.
 *   missing grant                                   KV_GRANT_MISSING
 *   not the client's signature, or another key      KV_GRANT_FORGED
 *   another destination, source (the connection's
 *   remote peer id) or model                        KV_GRANT_FOREIGN
 *   expired, or valid for longer than a grant may be KV_GRANT_EXPIRED
 *   a grant id already accepted                     KV_GRANT_REPLAYED
 *   another span or position range than the
 *   destination session's                           KV_GRANT_WRONG_SPAN
 * The seal itself (AES-GCM tag, bound fields, sequence, order) is checked by SessionCrypto.openKv
 * frame by frame (SNAPSHOT_TAMPERED, SNAPSHOT_MISBOUND...).
 */
import { timingSafeEqual } from 'node:crypto'
import {
  type KvGrant,
  KvGrantExpiredError,
  KvGrantForeignError,
  KvGrantForgedError,
  KvGrantMissingError,
  KvGrantReplayedError,
  KvGrantWrongSpanError,
  MAX_KV_GRANT_LIFETIME_MS,
  verifyKvGrant,
  wrappedKeyHash
} from '../../../protocol/index.js'
import type { NodeSession } from '../node-session.js'

export interface GrantCheckContext {
  readonly peerId: string
  readonly modelId: string
  readonly now?: () => number
}

/** Grant ids a destination accepted, until they expire (a grant lives at most MAX_KV_GRANT_LIFETIME_MS). */
export class SeenGrants {
  private readonly seen = new Map<string, number>()
  constructor(private readonly maxHeld = 65_536) {}

  has(id: Uint8Array, nowMs: number): boolean {
    this.sweep(nowMs)
    return this.seen.has(Buffer.from(id).toString('hex'))
  }

  add(id: Uint8Array, expiresAtMs: number): void {
    // bounded: past the cap the oldest entries go (grants expire within two minutes anyway)
    if (this.seen.size >= this.maxHeld) this.seen.delete(this.seen.keys().next().value as string)
    this.seen.set(Buffer.from(id).toString('hex'), expiresAtMs)
  }

  private sweep(nowMs: number): void {
    for (const [k, until] of this.seen) if (until < nowMs) this.seen.delete(k)
  }
}

/** The grant's checks that need no session: signature, parties, model, time, replay. */
export async function checkGrant(
  ctx: GrantCheckContext,
  seen: SeenGrants,
  grant: KvGrant | undefined,
  wrappedKey: Uint8Array | undefined,
  remotePeerId: string
): Promise<KvGrant> {
  if (grant === undefined) throw new KvGrantMissingError('KV refused: the transfer carries no grant')
  if (!(await verifyKvGrant(grant)))
    throw new KvGrantForgedError(`KV refused: the grant is not signed by its client ${grant.clientPeerId}`)
  if (wrappedKey === undefined || !sameBytes(wrappedKeyHash(wrappedKey), grant.wrappedKeyHash))
    throw new KvGrantForgedError('KV refused: the wrapped key is not the one the client granted')
  if (grant.destinationPeerId !== ctx.peerId)
    throw new KvGrantForeignError(`KV refused: the grant is for ${grant.destinationPeerId}, not this peer`)
  if (grant.sourcePeerId !== remotePeerId)
    throw new KvGrantForeignError(`KV refused: the grant names source ${grant.sourcePeerId}, the sender is ${remotePeerId}`)
  if (grant.modelId !== ctx.modelId) throw new KvGrantForeignError('KV refused: the grant is for another model')
  const now = (ctx.now ?? Date.now)()
  if (grant.expiresAtMs < now) throw new KvGrantExpiredError(`KV refused: the grant expired ${now - grant.expiresAtMs} ms ago`)
  if (grant.expiresAtMs > now + MAX_KV_GRANT_LIFETIME_MS)
    throw new KvGrantExpiredError(`KV refused: a grant may live at most ${MAX_KV_GRANT_LIFETIME_MS} ms`)
  if (seen.has(grant.grantId, now)) throw new KvGrantReplayedError('KV refused: this grant was already used')
  return grant
}

/** The destination session must be the granted one: same span, and it holds exactly [0, from). */
export function checkGrantSession(grant: KvGrant, session: NodeSession, length: number): void {
  const span = session.keys?.span ?? [session.start, session.end]
  if (span[0] !== grant.start || span[1] !== grant.end)
    throw new KvGrantWrongSpanError(
      `KV refused: the grant is for blocks [${grant.start}, ${grant.end}), session ${session.id} runs [${span[0]}, ${span[1]})`
    )
  if (length !== grant.fromPosition)
    throw new KvGrantWrongSpanError(
      `KV refused: the grant moves positions from ${grant.fromPosition}, session ${session.id} holds ${length}`
    )
  if (grant.toPosition > session.maxLength)
    throw new KvGrantWrongSpanError(
      `KV refused: position ${grant.toPosition} is past session ${session.id}'s ${session.maxLength}`
    )
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}
