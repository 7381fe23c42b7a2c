/**
 * Errors of the browser client (client/browser/), one class per condition with a stable `code`.
 * They are also what the chat page shows: each message says what to fix.
 */
export class BrowserClientError extends Error {
  readonly code: string = 'BROWSER_CLIENT'
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}

/** The model URL answered an HTTP error, or the network failed. */
export class ModelFetchError extends BrowserClientError {
  override readonly code = 'MODEL_FETCH'
}

/** The server ignored the Range header (200 with the whole file) or sent the wrong range. */
export class RangeNotSupportedError extends BrowserClientError {
  override readonly code = 'RANGE_NOT_SUPPORTED'
}

/** A read asked for bytes that were not fetched (a tensor outside the client's edge). */
export class RangeNotFetchedError extends BrowserClientError {
  override readonly code = 'RANGE_NOT_FETCHED'
}

/** A Node-only facility (files, worker threads, the native addon) was called in the browser. */
export class NotInBrowserError extends BrowserClientError {
  override readonly code = 'NOT_IN_BROWSER'
}

/** The worker was asked to generate before it was given `init`. */
export class WorkerNotReadyError extends BrowserClientError {
  override readonly code = 'WORKER_NOT_READY'
}
