/**
 * Errors of the node daemon that stay on this machine. Conditions a peer hears about (BUSY,
 * UNKNOWN_SESSION, DUPLICATE_SESSION, BAD_SPAN...) are the protocol's classes
 * (protocol/errors.ts): one class per condition, its `code` the wire ErrorCode name.
 */
export class NodeError extends Error {
  readonly code: string = 'NODE'
  constructor(message: string) {
    super(message)
    this.name = new.target.name
  }
}

/** An option from the command line, the environment or a config file that cannot be used. */
export class ConfigError extends NodeError {
  override readonly code = 'CONFIG'
}

/** `--tamper*` options (or a tamper context) out of range. */
export class InvalidTamperOptionsError extends NodeError {
  override readonly code = 'INVALID_TAMPER_OPTIONS'
}

/** Step batching options (`--max-queued-steps`, `--max-batch-rows`, `--batch-wait-ms`) out of range. */
export class InvalidBatchOptionsError extends NodeError {
  override readonly code = 'INVALID_BATCH_OPTIONS'
}
