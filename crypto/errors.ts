/**
 * Typed errors of crypto/. One class per condition, each with a stable `code` (the wire
 * ErrorCode name when the condition travels, protocol/errors.ts) so node/ and client/ can map them to wire errors without string matching.
 * Messages never contain key bytes or plaintext; they name fields and lengths only.
 */
export class CryptoError extends Error {
  readonly code: string = 'CRYPTO'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
  }
}

/** An argument of the wrong type, length or range (a programming error, not an attack). */
export class InvalidCryptoArgumentError extends CryptoError {
  override readonly code = 'INVALID_CRYPTO_ARGUMENT'
}

/** AES-GCM authentication failed: wrong key, wrong nonce, altered ciphertext, tag or associated data. */
export class TagMismatchError extends CryptoError {
  override readonly code = 'TAG_MISMATCH'
}

/** An X25519 exchange produced the all-zero secret: the peer's public key is a low-order point (RFC 7748 §6.1). */
export class WeakPublicKeyError extends CryptoError {
  override readonly code = 'BAD_HOP_KEY'
}

/** A snapshot whose bytes were altered or cut short (its tag does not verify, or it cannot be parsed). */
export class SnapshotTamperedError extends CryptoError {
  override readonly code: string = 'SNAPSHOT_TAMPERED'
}

/** A snapshot of a format version this code does not know (treated as tampered by callers that only check instanceof). */
export class SnapshotVersionError extends SnapshotTamperedError {
  override readonly code = 'SNAPSHOT_TAMPERED'
}

/** The header fields a snapshot can be bound to. */
export type SnapshotField = 'modelId' | 'sessionId' | 'span' | 'clientId' | 'prefixHash' | 'dtype' | 'kind'

/** An authentic snapshot bound to another model, session, span, client, token prefix or dtype. */
export class SnapshotMisboundError extends CryptoError {
  override readonly code = 'SNAPSHOT_MISBOUND'
  readonly field: SnapshotField
  constructor(field: SnapshotField, message: string) {
    super(message)
    this.field = field
  }
}

/** An authentic snapshot older than the newest one already accepted (sequence below the minimum). */
export class SnapshotReplayError extends CryptoError {
  override readonly code = 'SNAPSHOT_REPLAY'
}

/** An authentic delta that does not start where the previous one ended. */
export class SnapshotOrderError extends CryptoError {
  override readonly code = 'SNAPSHOT_ORDER'
}

/** A wrapped key addressed to another X25519 key (another peer). */
export class KeyNotForUsError extends CryptoError {
  override readonly code = 'KEY_NOT_FOR_US'
}

/** A wrapped key addressed to us that does not authenticate: altered, or bound to another session/peer id/span. */
export class KeyUnwrapError extends CryptoError {
  override readonly code = 'KEY_UNWRAP'
}

/** A step tag that does not verify: the step was not authorized by the session's client. */
export class UnauthorizedStepError extends CryptoError {
  override readonly code = 'UNAUTHORIZED'
}

/** Issue #35: a sealed head reply whose bytes were altered or cut short (its tag does not verify, or it cannot be parsed). */
export class HeadTamperedError extends CryptoError {
  override readonly code = 'HEAD_TAMPERED'
}

/** Issue #35: an authentic-looking head reply for an earlier (or later) step than the one asked: a replay. */
export class HeadReplayError extends CryptoError {
  override readonly code = 'HEAD_REPLAY'
}

/** Issue #35: a head reply for another position, session or row count than the step asked. */
export class HeadMisboundError extends CryptoError {
  override readonly code = 'HEAD_MISBOUND'
}
