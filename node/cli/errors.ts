/**
 * Errors of the command line, one class per condition. The CLI prints each as one line,
 * `layerswarm: <message> (<code>)`, and exits non-zero (node/cli/cli-exit.ts).
 */
export class CliError extends Error {
  readonly code: string = 'CLI'
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}

/** An option value that parses but is not allowed (an inverted --layers span, --standby alone). */
export class BadOptionError extends CliError {
  override readonly code = 'BAD_OPTION'
}

/** --model or --tokenizer names a file that does not exist or cannot be read. */
export class ModelNotFoundError extends CliError {
  override readonly code = 'MODEL_NOT_FOUND'
}

/** --listen is not a listen multiaddr (a host:port, a typo). */
export class BadListenAddressError extends CliError {
  override readonly code = 'BAD_LISTEN_ADDRESS'
}

/** Another process listens on the --listen (or --metrics) address already. */
export class AddressInUseError extends CliError {
  override readonly code = 'ADDRESS_IN_USE'
}

/** Listening failed for another reason (an address not on this machine, no permission). */
export class ListenFailedError extends CliError {
  override readonly code = 'LISTEN_FAILED'
}

/** The prompt alone fills the model's context: nothing could be generated (the gateway's 400). */
export class ContextLengthExceededError extends CliError {
  override readonly code = 'CONTEXT_LENGTH_EXCEEDED'
}

/** `doctor` found at least one check that failed. */
export class DoctorFailedError extends CliError {
  override readonly code = 'DOCTOR'
}

/** `--use-relay`: no relay among the connected peers granted a reservation in time (the node serves on, unreachable from outside its network until one does). */
export class NoRelayReservationError extends CliError {
  override readonly code = 'NO_RELAY_RESERVATION'
}

/** `join`: the node it runs exited on its own (a bad option, a crash); join stops too. */
export class JoinedNodeExitedError extends CliError {
  override readonly code = 'JOINED_NODE_EXITED'
}
