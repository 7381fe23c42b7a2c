/**
 * Typed errors of the canary layer. One class per condition, each with a stable `code`, so the
 * client and the node can map them without string matching.
 */
export class CanaryError extends Error {
  readonly code: string = 'CANARY'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
  }
}

/** An argument outside its documented range or of the wrong shape. */
export class CanaryArgumentError extends CanaryError {
  override readonly code = 'CANARY_INVALID_ARGUMENT'
}

/** A canary set file made for another model or another span boundary. */
export class CanarySetMismatchError extends CanaryError {
  override readonly code = 'CANARY_SET_MISMATCH'
}

/** A canary set file of an older (or newer) format: rebuild it. */
export class CanarySetVersionError extends CanaryError {
  override readonly code = 'CANARY_SET_VERSION'
}

/** A canary set file that is truncated, altered or not a canary set at all. */
export class CorruptCanarySetError extends CanaryError {
  override readonly code = 'CANARY_SET_CORRUPT'
}

/** A drift model (calibration) whose JSON does not have the documented shape. */
export class InvalidDriftModelError extends CanaryError {
  override readonly code = 'INVALID_DRIFT_MODEL'
}

/** A canary bank key file that does not hold a 32-byte hex key, or cannot be read. */
export class CanaryBankKeyError extends CanaryError {
  override readonly code = 'CANARY_BANK_KEY'
}

/** A canary bank the key does not open (another key, or the sealed bytes were altered). */
export class CanaryBankLockedError extends CanaryError {
  override readonly code = 'CANARY_BANK_LOCKED'
}

/** A canary bank built for another model. */
export class CanaryBankMismatchError extends CanaryError {
  override readonly code = 'CANARY_BANK_MISMATCH'
}

/** A file that is not a canary bank, truncated, or of an unknown format. */
export class CorruptCanaryBankError extends CanaryError {
  override readonly code = 'CANARY_BANK_CORRUPT'
}

/** A canary bank without the states at a block boundary the client's route needs. */
export class CanaryBankLevelError extends CanaryError {
  override readonly code = 'CANARY_BANK_LEVEL'
}

/**
 * Every canary of the set has been sent to a peer already, and the set cannot grow (a bank, or
 * prompts given): a repeated canary input tells a peer it is a decoy, so none is sent.
 */
export class CanariesSpentError extends CanaryError {
  override readonly code = 'CANARIES_SPENT'
}

/**
 * A peer has seen every canary built so far and its new ones are still being built (in slices,
 * between real steps): it gets no decoy until they are. Not a fault; the probe is skipped.
 */
export class CanariesPendingError extends CanaryError {
  override readonly code = 'CANARIES_PENDING'
}

/** `--tamper*` options (or a tamper context) out of range (canary/tamper.ts, the detector's adversary). */
export class InvalidTamperOptionsError extends CanaryError {
  override readonly code = 'INVALID_TAMPER_OPTIONS'
}
