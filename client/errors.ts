import { ProtocolError } from '../protocol/index.js'
/**
 * What can be wrong with a bootstrap address, one error class per condition. Each message is
 * one line that says what to fix; `code` is what the CLI prints after it.
 */
export class BootstrapError extends Error {
  readonly code: string = 'BOOTSTRAP'
  constructor(
    message: string,
    readonly addr: string,
    options?: ErrorOptions
  ) {
    super(message, options)
    this.name = new.target.name
  }
}

/** Not a multiaddr at all (a host:port, a URL, a typo). */
export class BadBootstrapAddressError extends BootstrapError {
  override readonly code = 'BAD_BOOTSTRAP_ADDRESS'
}

/** Nothing answers at the address (refused, unroutable, timed out). */
export class BootstrapUnreachableError extends BootstrapError {
  override readonly code = 'BOOTSTRAP_UNREACHABLE'
}

/** Something answers, but not the peer id in the address (it restarted with a new identity). */
export class BootstrapPeerIdMismatchError extends BootstrapError {
  override readonly code = 'BOOTSTRAP_PEER_ID'
}

export class NoRouteError extends Error {
  readonly code: string = 'NO_ROUTE'
  constructor(message: string) {
    super(message)
    this.name = 'NoRouteError'
  }
}

/** A hop whose X25519 key is missing or not signed by its peer id's key: never use it. */
export class BadHopKeyError extends ProtocolError {
  override readonly code = 'BAD_HOP_KEY'
  readonly hopPeerId: string
  constructor(peerId: string, message: string) {
    super(`hop ${peerId}: ${message}`)
    this.hopPeerId = peerId
  }
}

/** Evidence JSON that is not what a layerswarm report holds. */
export class InvalidEvidenceError extends Error {
  readonly code = 'INVALID_EVIDENCE'
  constructor(message: string) {
    super(message)
    this.name = 'InvalidEvidenceError'
  }
}

/** A canary secret file that is not one (wrong size, not hex, readable by others). */
export class InvalidCanarySecretError extends Error {
  readonly code = 'INVALID_CANARY_SECRET'
  constructor(message: string) {
    super(message)
    this.name = 'InvalidCanarySecretError'
  }
}

/** A generation convicted peers more often than MAX_ROLLBACKS allows: no honest result to give. */
export class TooManyRollbacksError extends Error {
  readonly code = 'TOO_MANY_ROLLBACKS'
  constructor(readonly rollbacks: number) {
    super(`${rollbacks} recomputations after convictions: no honest completion could be made`)
    this.name = 'TooManyRollbacksError'
  }
}

/** verifiedStream without canaries: nothing could ever verify a peer. */
export class VerifiedStreamNeedsCanariesError extends Error {
  readonly code = 'VERIFIED_STREAM_NEEDS_CANARIES'
  constructor() {
    super('verifiedStream holds tokens until canaries clear their peers: it needs canaries on')
    this.name = 'VerifiedStreamNeedsCanariesError'
  }
}

/** A trust file that cannot be read as one (the client leaves it alone and starts afresh). */
export class InvalidTrustFileError extends Error {
  readonly code = 'INVALID_TRUST_FILE'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'InvalidTrustFileError'
  }
}

export class InvalidWireError extends Error {
  readonly code = 'INVALID_ARGUMENT'
  constructor(message: string) {
    super(message)
    this.name = 'InvalidWireError'
  }
}

/** No route whose hops accept the requested wire dtype (peers that would cover the span do exist). */
export class UnsupportedWireError extends NoRouteError {
  override readonly code: string = 'WIRE_UNSUPPORTED'
  constructor(message: string) {
    super(message)
    this.name = 'UnsupportedWireError'
  }
}

/** A hop whose receipt does not match what it was sent and what it answered. */
export class BadReceiptError extends Error {
  readonly code = 'BAD_RECEIPT'
  constructor(
    readonly peerId: string,
    message: string
  ) {
    super(message)
    this.name = 'BadReceiptError'
  }
}

/** A peer the canaries convicted: the route drops it (a failover, not a failure of the step). */
export class PeerExcludedError extends Error {
  readonly code = 'EXCLUDED'
  constructor(readonly peerId: string) {
    super(`peer ${peerId} excluded by canaries`)
    this.name = 'PeerExcludedError'
  }
}

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

/** A thin client touched a block it does not hold (a bug: with a bank nothing should). */
export class BlockNotHeldError extends Error {
  readonly code = 'BLOCK_NOT_HELD'
  constructor(message: string) {
    super(message)
    this.name = 'BlockNotHeldError'
  }
}
