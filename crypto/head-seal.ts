/**
 * Sealed head replies (issue #35): the hop that runs the model's last block and its head answers
 * the top-k logits of a step as AES-256-GCM ciphertext under a key only the session's client and
 * that hop hold (HKDF from the session's step-MAC key, which both ends already hold: no new key agreement). The clear
 * header names the step id, position and row count; the associated data binds that header, the
 * session id and the hop's peer id, so a reply cannot be replayed for a later step, moved to another
 * position or session, or altered: the client refuses each with its own code (HEAD_REPLAY,
 * HEAD_MISBOUND, HEAD_TAMPERED) before it reads a byte of the plaintext.
 *
 * Frame: "LSH1" ‖ u64 step id ‖ u32 position ‖ u32 rows ‖ 12-byte nonce ‖ ciphertext ‖ 16-byte tag.
 */
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, open, randomNonce, seal } from './aead.js'
import { assertBytes, assertString, FieldWriter, utf8Bytes } from './encoding.js'
import { HeadMisboundError, HeadReplayError, HeadTamperedError } from './errors.js'
import type { HopKeys } from './hkdf.js'
import { hkdfSha256 } from './hkdf.js'

export const HEAD_REPLY_LABEL = 'layerswarm/head-reply/v1'
const MAGIC = utf8Bytes('LSH1')
const HEADER_BYTES = 4 + 8 + 4 + 4 + GCM_NONCE_BYTES

/** What a head reply is bound to: the session, the hop that answers, the step and its rows. */
export interface HeadReplyBinding {
  readonly sessionId: string
  readonly hopPeerId: string
  readonly stepId: number
  readonly position: number
  readonly rows: number
}

/** The session's head key: both ends derive it from the hop keys they already share. */
export function headReplyKey(keys: Pick<HopKeys, 'stepMacKey'>): Uint8Array {
  return hkdfSha256(keys.stepMacKey, new Uint8Array(0), utf8Bytes(HEAD_REPLY_LABEL), 32)
}

function header(b: HeadReplyBinding, nonce: Uint8Array): Uint8Array {
  const h = new Uint8Array(HEADER_BYTES)
  const dv = new DataView(h.buffer)
  h.set(MAGIC, 0)
  dv.setBigUint64(4, BigInt(b.stepId))
  dv.setUint32(12, b.position)
  dv.setUint32(16, b.rows)
  h.set(nonce, 20)
  return h
}

function aad(b: HeadReplyBinding, head: Uint8Array): Uint8Array {
  assertString('sessionId', b.sessionId, 256)
  assertString('hopPeerId', b.hopPeerId, 256)
  return new FieldWriter().string(HEAD_REPLY_LABEL).string(b.sessionId).string(b.hopPeerId).bytes(head).finish()
}

/** The hop seals a head reply's plaintext (shards/head-topk.ts encodeHeadRows) for one step. */
export function sealHeadReply(key: Uint8Array, binding: HeadReplyBinding, plaintext: Uint8Array): Uint8Array {
  assertBytes('plaintext', plaintext)
  const h = header(binding, randomNonce())
  const out = new Uint8Array(HEADER_BYTES + plaintext.length + GCM_TAG_BYTES)
  out.set(h, 0)
  seal(key, h.subarray(20), plaintext, aad(binding, h), out.subarray(HEADER_BYTES))
  return out
}

/**
 * The client opens the reply to the step it asked: another step id is a replay, another position
 * or row count a misbound reply, and anything that does not authenticate is tampered.
 */
export function openHeadReply(key: Uint8Array, expected: HeadReplyBinding, sealed: Uint8Array): Uint8Array {
  assertBytes('sealed', sealed)
  if (sealed.length < HEADER_BYTES + GCM_TAG_BYTES || !MAGIC.every((c, i) => sealed[i] === c)) {
    throw new HeadTamperedError(`a head reply of ${sealed.length} bytes that is no sealed head frame`)
  }
  const dv = new DataView(sealed.buffer, sealed.byteOffset, sealed.byteLength)
  const stepId = Number(dv.getBigUint64(4))
  const position = dv.getUint32(12)
  const rows = dv.getUint32(16)
  if (stepId !== expected.stepId) {
    throw new HeadReplayError(`a head reply for step ${stepId}, not step ${expected.stepId}`)
  }
  if (position !== expected.position || rows !== expected.rows) {
    throw new HeadMisboundError(
      `a head reply for ${rows} rows at position ${position}, not ${expected.rows} at ${expected.position}`
    )
  }
  const h = sealed.subarray(0, HEADER_BYTES)
  try {
    return open(key, h.subarray(20), sealed.subarray(HEADER_BYTES), aad(expected, h))
  } catch (err) {
    throw new HeadTamperedError('a head reply that does not authenticate (altered bytes, or another session or hop)', {
      cause: err
    })
  }
}
