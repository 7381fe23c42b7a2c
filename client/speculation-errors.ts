/** Errors of speculative decoding (client/speculative-decode.ts and its drafters). */

/** A speculation option or a drafter's argument is out of range. */
export class InvalidSpeculationError extends Error {
  readonly code = 'INVALID_SPECULATION'
  constructor(message: string) {
    super(message)
    this.name = 'InvalidSpeculationError'
  }
}

/** The draft model cannot draft for this model: another vocabulary or tokenizer. */
export class DraftModelMismatchError extends Error {
  readonly code = 'DRAFT_MODEL_MISMATCH'
  constructor(message: string) {
    super(message)
    this.name = 'DraftModelMismatchError'
  }
}
