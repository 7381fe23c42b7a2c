/**
 * AES-256-GCM (NIST SP 800-38D) via node:crypto, with 96-bit nonces and 128-bit tags.
 *
 * Nonces: `randomNonce()` draws 12 random bytes per message. The rule GCM's security rests
 * on is that a (key, nonce) pair is NEVER used twice; with random 96-bit nonces SP 800-38D
 * §8.3 caps one key at 2^32 messages. layerswarm keys are per session and span and seal a
 * handful of snapshots each, far below that. Callers that prefer counters may pass any
 * unique 12-byte nonce (e.g. `counterNonce`), but must never reset the counter under one key.
 *
 * Large inputs are processed in 256 KiB pieces copied into one output buffer, which the
 * caller may provide and reuse: node's `update()` on a whole 64 MiB buffer allocates a fresh
 * 64 MiB result, which on this VM costs more than the cipher itself.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { assertBytes } from './encoding.js'
import { InvalidCryptoArgumentError, TagMismatchError } from './errors.js'

export const AES_KEY_BYTES = 32
export const GCM_NONCE_BYTES = 12
export const GCM_TAG_BYTES = 16
const PIECE = 256 * 1024

/** Input to seal: one buffer or a list of buffers sealed as their concatenation (no copy). */
export type PlaintextParts = Uint8Array | readonly Uint8Array[]

export function randomNonce(): Uint8Array {
  return new Uint8Array(randomBytes(GCM_NONCE_BYTES))
}

/** A deterministic nonce: 4-byte fixed field ‖ 8-byte big-endian counter (SP 800-38D §8.2.1). */
export function counterNonce(fixed: number, counter: number): Uint8Array {
  if (!Number.isInteger(fixed) || fixed < 0 || fixed > 0xffffffff)
    throw new InvalidCryptoArgumentError('fixed field must be a u32')
  if (!Number.isSafeInteger(counter) || counter < 0)
    throw new InvalidCryptoArgumentError('counter must be a non-negative safe integer')
  const n = new Uint8Array(GCM_NONCE_BYTES)
  const dv = new DataView(n.buffer)
  dv.setUint32(0, fixed)
  dv.setBigUint64(4, BigInt(counter))
  return n
}

function partsOf(plaintext: PlaintextParts): readonly Uint8Array[] {
  const parts = plaintext instanceof Uint8Array ? [plaintext] : plaintext
  if (!Array.isArray(parts)) throw new InvalidCryptoArgumentError('plaintext must be a Uint8Array or an array of them')
  for (const p of parts) assertBytes('plaintext part', p)
  return parts
}

export function plaintextLength(plaintext: PlaintextParts): number {
  let n = 0
  for (const p of partsOf(plaintext)) n += p.length
  return n
}

function checkKeyNonce(key: Uint8Array, nonce: Uint8Array): void {
  assertBytes('key', key, AES_KEY_BYTES)
  assertBytes('nonce', nonce, GCM_NONCE_BYTES)
}

function outputBuffer(out: Uint8Array | undefined, length: number, what: string): Uint8Array {
  if (out === undefined) return new Uint8Array(length)
  assertBytes(what, out)
  if (out.length < length)
    throw new InvalidCryptoArgumentError(`${what} of ${out.length} bytes is smaller than the ${length} needed`)
  return out.subarray(0, length)
}

/**
 * ciphertext ‖ tag of `plaintext` under (key, nonce) with associated data `aad`, written to
 * `out` (at least plaintext length + 16 bytes) when given. Returns the written bytes.
 */
export function seal(
  key: Uint8Array,
  nonce: Uint8Array,
  plaintext: PlaintextParts,
  aad?: Uint8Array,
  out?: Uint8Array
): Uint8Array {
  checkKeyNonce(key, nonce)
  const parts = partsOf(plaintext)
  const total = plaintextLength(parts)
  const dst = outputBuffer(out, total + GCM_TAG_BYTES, 'out')
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: GCM_TAG_BYTES })
  if (aad !== undefined) {
    assertBytes('aad', aad)
    cipher.setAAD(aad)
  }
  let o = 0
  for (const part of parts) {
    for (let i = 0; i < part.length; i += PIECE) {
      const piece = cipher.update(part.subarray(i, Math.min(part.length, i + PIECE)))
      dst.set(piece, o)
      o += piece.length
    }
  }
  const rest = cipher.final()
  dst.set(rest, o)
  o += rest.length
  dst.set(cipher.getAuthTag(), o)
  return dst
}

/**
 * The plaintext of `sealed` (= ciphertext ‖ tag) under (key, nonce, aad), written to `out` (at
 * least sealed length - 16 bytes) when given. Throws TagMismatchError when authentication
 * fails; the output region is then zeroed, so no unauthenticated plaintext is left behind.
 */
export function open(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array, aad?: Uint8Array, out?: Uint8Array): Uint8Array {
  checkKeyNonce(key, nonce)
  assertBytes('sealed', sealed)
  if (sealed.length < GCM_TAG_BYTES) throw new TagMismatchError(`sealed data of ${sealed.length} bytes is shorter than a tag`)
  const n = sealed.length - GCM_TAG_BYTES
  const dst = outputBuffer(out, n, 'out')
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: GCM_TAG_BYTES })
  decipher.setAuthTag(sealed.subarray(n))
  if (aad !== undefined) {
    assertBytes('aad', aad)
    decipher.setAAD(aad)
  }
  let o = 0
  try {
    for (let i = 0; i < n; i += PIECE) {
      const piece = decipher.update(sealed.subarray(i, Math.min(n, i + PIECE)))
      dst.set(piece, o)
      o += piece.length
    }
    const rest = decipher.final()
    dst.set(rest, o)
  } catch {
    dst.fill(0)
    throw new TagMismatchError('AES-GCM authentication failed (wrong key, or altered ciphertext, tag or associated data)')
  }
  return dst
}
