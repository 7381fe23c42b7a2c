/**
 * Errors of the OpenAI-compatible gateway, shaped as OpenAI's:
 * `{ error: { message, type, param, code } }` with the matching HTTP status, so existing
 * clients (the `openai` package, LangChain, curl scripts) report them the way they expect.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly code: string | null = null,
    readonly param: string | null = null
  ) {
    super(message)
    this.name = 'ApiError'
  }

  toJSON(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}

export const invalidRequest = (message: string, param: string | null = null, code: string | null = null): ApiError =>
  new ApiError(400, message, 'invalid_request_error', code, param)

/** The gateway refuses to start (e.g. a public address without a key). */
export class GatewayConfigError extends Error {
  readonly code: string
  constructor(message: string, code = 'GATEWAY_CONFIG') {
    super(message)
    this.name = 'GatewayConfigError'
    this.code = code
  }
}

/** An error from fastify, the SDK or the swarm → the OpenAI-style error to send. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err
  const e = err as { code?: unknown; statusCode?: unknown; message?: unknown; name?: unknown }
  const code = typeof e.code === 'string' ? e.code : ''
  const message = typeof e.message === 'string' ? e.message : String(err)
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'Request body too large', 'invalid_request_error', 'request_too_large')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'Content-Type must be application/json', 'invalid_request_error', 'unsupported_media_type')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return invalidRequest(`We could not parse the JSON body of your request: ${message}`, null, 'invalid_json')
    case 'BUSY':
      return new ApiError(429, `The swarm is busy: ${message}`, 'rate_limit_error', 'busy')
    case 'NO_ROUTE':
      return new ApiError(503, `No route through the swarm: ${message}`, 'service_unavailable', 'no_route')
    case 'INVALID_ARGUMENT': // argument checks in shards/ and client/
      return invalidRequest(message, null, 'invalid_argument')
  }
  if (e.name === 'SyntaxError' && typeof e.statusCode === 'number' && e.statusCode === 400) {
    return invalidRequest(`We could not parse the JSON body of your request: ${message}`, null, 'invalid_json')
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new ApiError(e.statusCode, message, 'invalid_request_error', code || null)
  }
  // Our own failure: its text may name paths, peers or another request's state (issue #17), so
  // the client gets the code only; the gateway logs the full error.
  return new ApiError(500, `The gateway failed${code ? ` (${code})` : ''}`, 'server_error', code || 'internal_error')
}
