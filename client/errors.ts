import { ProtocolError } from '../protocol/index.js'
/**
 * Base of the client's own errors (conditions that do not travel on the wire): `code` is stable,
 * `name` the class name.
 */
export class ClientError extends Error {
  readonly code: string = 'CLIENT'
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}

/**
 * What can be wrong with a bootstrap address, one error class per condition. Each message is
 * one line that says what to fix; `code` is what the CLI prints after it.
 */
export class BootstrapError extends ClientError {
  override readonly code: string = 'BOOTSTRAP'
  constructor(
    message: string,
    readonly addr: string,
    options?: ErrorOptions
  ) {
    super(message, options)
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

/**
 * The address names this very peer's own id: another process runs on the same key (two nodes
 * sharing one key file are one peer to the swarm, issue #31), not a restarted node.
 */
export class DuplicatePeerIdError extends BootstrapError {
  override readonly code = 'DUPLICATE_PEER_ID'
}

/**
 * The bootstrap peer refused the connection at the private-swarm check (issue #38): it holds
 * another swarm key than ours, or we hold none and it does (then the encrypter negotiation
 * reads pnet's bytes as garbage: libp2p's EncryptionFailedError).
 */
export class BootstrapSwarmKeyError extends BootstrapError {
  override readonly code = 'SWARM_KEY_MISMATCH'
}

/** No chain of live peers covers the model's remote blocks (code NO_ROUTE). */
export class NoRouteError extends ClientError {
  override readonly code: string = 'NO_ROUTE'
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
export class InvalidEvidenceError extends ClientError {
  override readonly code = 'INVALID_EVIDENCE'
}

/** A canary secret file that is not one (wrong size, not hex, readable by others). */
export class InvalidCanarySecretError extends ClientError {
  override readonly code = 'INVALID_CANARY_SECRET'
}

/** A generation convicted peers more often than MAX_ROLLBACKS allows: no honest result to give. */
export class TooManyRollbacksError extends ClientError {
  override readonly code = 'TOO_MANY_ROLLBACKS'
  constructor(readonly rollbacks: number) {
    super(`${rollbacks} recomputations after convictions: no honest completion could be made`)
  }
}

/** verifiedStream without canaries: nothing could ever verify a peer. */
export class VerifiedStreamNeedsCanariesError extends ClientError {
  override readonly code = 'VERIFIED_STREAM_NEEDS_CANARIES'
  constructor() {
    super('verifiedStream holds tokens until canaries clear their peers: it needs canaries on')
  }
}

/** A trust file that cannot be read as one (the client leaves it alone and starts afresh). */
export class InvalidTrustFileError extends ClientError {
  override readonly code: string = 'INVALID_TRUST_FILE'
}

/**
 * A trust file group or others may read or write (POSIX mode bits), or a symlink (issue #39):
 * whoever can write it can forge convictions or clear them, whoever can read it learns which
 * peers this client used. Refused like an exposed identity file (node/identity.ts).
 */
export class TrustFileExposedError extends InvalidTrustFileError {
  override readonly code: string = 'TRUST_FILE_EXPOSED'
}

export class InvalidWireError extends ClientError {
  override readonly code = 'INVALID_ARGUMENT'
}

/** No route whose hops accept the requested wire dtype (peers that would cover the span do exist). */
export class UnsupportedWireError extends NoRouteError {
  override readonly code: string = 'WIRE_UNSUPPORTED'
}

/** A chained standby on an older node that would forward under one shared session id (issue 39). */
export class NoPerHopIdsError extends ClientError {
  override readonly code = 'NO_PER_HOP_IDS'
}

/** A hop whose receipt does not match what it was sent and what it answered. */
export class BadReceiptError extends ClientError {
  override readonly code = 'BAD_RECEIPT'
  constructor(
    readonly peerId: string,
    message: string
  ) {
    super(message)
  }
}

/** A peer the canaries convicted: the route drops it (a failover, not a failure of the step). */
export class PeerExcludedError extends ClientError {
  override readonly code = 'EXCLUDED'
  constructor(readonly peerId: string) {
    super(`peer ${peerId} excluded by canaries`)
  }
}

/** A speculation option or a drafter's argument is out of range. */
export class InvalidSpeculationError extends ClientError {
  override readonly code = 'INVALID_SPECULATION'
}

/** The draft model cannot draft for this model: another vocabulary or tokenizer. */
export class DraftModelMismatchError extends ClientError {
  override readonly code = 'DRAFT_MODEL_MISMATCH'
}

/** A thin client touched a block it does not hold (a bug: with a bank nothing should). */
export class BlockNotHeldError extends ClientError {
  override readonly code = 'BLOCK_NOT_HELD'
}

/** A hop or standby that imported sealed snapshots reports another length than they hold. */
export class KvRestoreMismatchError extends ClientError {
  override readonly code = 'KV_RESTORE_MISMATCH'
}

/** The bundled default model (models/stories260K.gguf) is not above this module: a broken install. */
export class BundledModelNotFoundError extends ClientError {
  override readonly code = 'BUNDLED_MODEL_NOT_FOUND'
}

/** A hop's stream aborted by the client: the hop was abandoned (failover) or closed without an answer. */
export class HopAbandonedError extends ClientError {
  override readonly code = 'HOP_ABANDONED'
}

/** Issue 33: no reachable peer serves (honestly) the manifest or a chunk of the weights asked for. */
export class WeightsUnavailableError extends ClientError {
  override readonly code = 'WEIGHTS_UNAVAILABLE'
}
