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
