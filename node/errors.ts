/**
 * Errors of the node daemon. Each `code` is a wire ErrorCode name, so a handler replies with it
 * as it is (protocol's errorCodeOf reads `code`).
 */
export class NodeError extends Error {
  readonly code: string = 'INTERNAL'
  constructor(message: string) {
    super(message)
    this.name = new.target.name
  }
}

/** Over a cap (sessions, KV tokens, queue): the client should route elsewhere. */
export class BusyError extends NodeError {
  override readonly code = 'BUSY'
}

export class DuplicateSessionError extends NodeError {
  override readonly code = 'DUPLICATE_SESSION'
}

/** A span this node does not hold, or a session opened for another model. */
export class BadSpanError extends NodeError {
  override readonly code = 'BAD_SPAN'
}

export class WrongModelError extends NodeError {
  override readonly code = 'WRONG_MODEL'
}

/** A request for a session from a peer that is neither its owner nor its chained upstream. */
export class UnauthorizedError extends NodeError {
  override readonly code = 'UNAUTHORIZED'
}

export class BadShapeError extends NodeError {
  override readonly code = 'BAD_SHAPE'
}

/** The node is leaving (SIGTERM): it runs no more steps, but still exports and closes sessions. */
export class LeavingError extends NodeError {
  override readonly code = 'LEAVING'
}

export class UnknownSessionError extends NodeError {
  override readonly code = 'UNKNOWN_SESSION'
}
