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

/** Step batching options (`--max-queued-steps`, `--max-batch-rows`, `--batch-wait-ms`) out of range. */
export class InvalidBatchOptionsError extends NodeError {
  override readonly code = 'INVALID_BATCH_OPTIONS'
}

/** An identity file others may read (group or world bits set): a peer's key must be the owner's alone. */
export class IdentityFileExposedError extends NodeError {
  override readonly code = 'IDENTITY_FILE_EXPOSED'
}

/** An identity file that does not hold a libp2p private key (truncated, another format, a folder). */
export class InvalidIdentityFileError extends NodeError {
  override readonly code = 'INVALID_IDENTITY_FILE'
}

/** `identity new` on a path that already holds a key (replacing it changes the peer id: --force). */
export class IdentityExistsError extends NodeError {
  override readonly code = 'IDENTITY_EXISTS'
}

/** `identity show` on a path without a key. */
export class IdentityNotFoundError extends NodeError {
  override readonly code = 'IDENTITY_NOT_FOUND'
}

/** A key file a running node holds (its `.lock` names a live pid): one key is one peer (issue #31). */
export class IdentityInUseError extends NodeError {
  override readonly code = 'IDENTITY_IN_USE'
}

/** The layerswarm package root (the folder with package.json) is not above this module: a broken install. */
export class PackageRootNotFoundError extends NodeError {
  override readonly code = 'PACKAGE_ROOT_NOT_FOUND'
}

/** A local-swarm node that printed no address before its start timeout (it is killed). */
export class NodeStartTimeoutError extends NodeError {
  override readonly code = 'NODE_START_TIMEOUT'
}

/** A local-swarm node whose process exited before it served. */
export class NodeExitedError extends NodeError {
  override readonly code = 'NODE_EXITED'
}

/** A node asked for its metrics URL that was started without `--metrics`. */
export class MetricsUnavailableError extends NodeError {
  override readonly code = 'METRICS_UNAVAILABLE'
}

/** A step batch whose run gave another number of results than it had steps (a bug of the runner). */
export class StepBatchResultError extends NodeError {
  override readonly code = 'STEP_BATCH_RESULT'
}

/** A queued step whose AbortSignal fired without a reason of its own. */
export class StepAbortedError extends NodeError {
  override readonly code = 'STEP_ABORTED'
}

/** A chained forward asked of the last hop of a chain, which has no next hop (a bug of the caller). */
export class NoNextHopError extends NodeError {
  override readonly code = 'NO_NEXT_HOP'
}

/** An invite token that does not decode (cut short, edited, another program's; issue #38). */
export class BadInviteError extends NodeError {
  override readonly code = 'BAD_INVITE'
}

/** An invite token past its expiry: ask the inviter for a new one (issue #38). */
export class InviteExpiredError extends NodeError {
  override readonly code = 'INVITE_EXPIRED'
}

/** The invite names another model than the one this command would load (issue #38). */
export class InviteModelMismatchError extends NodeError {
  override readonly code = 'INVITE_MODEL_MISMATCH'
}

/** `--model` names a Hub model in a shape we cannot read (issue 33 item 6: hf://org/repo/file.gguf or org/repo:QUANT). */
export class InvalidModelSourceError extends NodeError {
  override readonly code = 'INVALID_MODEL_SOURCE'
}

/** The Hub answered 401/403: a gated or private repository, without HF_TOKEN or with one that has no access. */
export class HubAuthError extends NodeError {
  override readonly code = 'HUB_AUTH'
}

/** The Hub has no such repository, revision or file, or no GGUF file of the quantisation asked for. */
export class HubNotFoundError extends NodeError {
  override readonly code = 'HUB_NOT_FOUND'
}

/** A download that failed after its retries (network, a status the Hub should not send, a short body). */
export class HubDownloadError extends NodeError {
  override readonly code = 'HUB_DOWNLOAD'
}

/** The downloaded bytes do not hash to the sha256 the Hub announced: the file is deleted, never opened. */
export class HubChecksumError extends NodeError {
  override readonly code = 'HUB_CHECKSUM'
}
