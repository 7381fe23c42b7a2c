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
