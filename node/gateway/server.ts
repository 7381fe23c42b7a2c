import { timingSafeEqual } from 'node:crypto'
import type { AbortOptions } from '@libp2p/interface'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify'
import type { LayerswarmClient, SpeculateMode } from '../../client/index.js'
import { isLoopbackHost, parseHostPort } from '../config.js'
import type { Metrics } from '../daemon/index.js'
import { hostAllowed } from '../daemon/index.js'
import type { Logger } from '../log.js'
import { DEFAULT_GATEWAY_BODY_LIMIT_BYTES, DEFAULT_GATEWAY_LISTEN, DEFAULT_GATEWAY_MAX_CONCURRENT } from '../options.js'
import { anthropicError, registerAnthropicRoutes } from './anthropic-routes.js'
import { BROWSER_DATA_ROUTES, BROWSER_FILES, registerBrowserRoutes } from './browser-routes.js'
import type { ChatFormatter } from './chat-template.js'
import { type ConnectionLimits, capConnections, httpServerOptions, resolveConnectionLimits } from './connection-limits.js'
import { ApiError, GatewayConfigError, toApiError } from './errors.js'
import type { GatewayContext } from './generation.js'
import { LiveStats } from './live-stats.js'
import { registerOpenAiRoutes } from './openai-routes.js'
import { registerStatus, STATIC_FILES } from './status.js'

export interface GatewayOptions extends ConnectionLimits {
  readonly client: LayerswarmClient
  /** HOST:PORT; loopback unless an api key is set. Port 0 picks a free one. */
  readonly listen?: string
  readonly apiKey?: string
  readonly modelName: string
  /** Readable, from the GGUF metadata (shards/model/model-name.ts); /v1/models shows it (issue 33 item 5). */
  readonly displayName?: string
  readonly chat: ChatFormatter
  readonly contextLength: number
  readonly log: Logger
  readonly metrics?: Metrics
  readonly maxConcurrent?: number
  /** Largest request body (default 1 MiB). */
  readonly bodyLimit?: number
  /** The model file, served with Range support to the browser chat page (/chat); none: no page. */
  readonly modelPath?: string
  /** ws:// multiaddrs for the chat page (default: the /ws addresses of peers the gateway knows). */
  readonly browserBootstrap?: readonly string[]
  /** A sealed canary bank the chat page may fetch (its key is not served). */
  readonly canaryBankPath?: string
  /** The client's --speculate: what `layerswarm.speculate: "draft"` means in a request. */
  readonly speculate?: SpeculateMode
  /** Downloads of /model.gguf at once (default DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS); more get 503 with Retry-After. */
  readonly maxModelDownloads?: number
}

export interface Gateway {
  readonly url: string
  /** The id clients pass as `model`. */
  readonly modelName: string
  readonly app: FastifyInstance
  readonly stats: LiveStats
  /** The SDK client it generates with (a multi-model front reads its swarm view: model-router.ts). */
  readonly client: LayerswarmClient
  close(): Promise<void>
}

/** Paths each route serves, for telling 405 (wrong method) from 404 (no such path). */
export const ROUTES: Record<string, string[]> = {
  '/v1/models': ['GET'],
  '/v1/completions': ['POST'],
  '/v1/chat/completions': ['POST'],
  '/v1/messages': ['POST'],
  '/status.json': ['GET'],
  ...Object.fromEntries(
    [...Object.keys(STATIC_FILES), ...Object.keys(BROWSER_FILES), ...BROWSER_DATA_ROUTES].map((p) => [p, ['GET']])
  )
}

function keyMatches(header: string | undefined, key: Buffer): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? '')
  if (!m) return false
  const given = Buffer.from(m[1].trim())
  // Constant time: the key must not leak through response timing.
  return given.length === key.length && timingSafeEqual(given, key)
}

function xApiKeyMatches(header: string | string[] | undefined, key: Buffer): boolean {
  return typeof header === 'string' && keyMatches(`Bearer ${header}`, key)
}

export { hostAllowed }

/** Where the gateway may listen: anything but loopback only with an API key. Throws GatewayConfigError. */
export function checkListen(listen: string, apiKey?: string): { host: string; port: number } {
  const { host, port } = parseHostPort(listen, '--listen')
  if (!isLoopbackHost(host) && !apiKey) {
    throw new GatewayConfigError(
      `refusing to listen on ${host}, which other machines can reach, without --api-key: anyone could spend this swarm's compute. ` +
        'Pass --api-key KEY (clients then send "Authorization: Bearer KEY"), or listen on 127.0.0.1.',
      'INSECURE_LISTEN'
    )
  }
  if (apiKey !== undefined && apiKey.length < 8)
    throw new GatewayConfigError('--api-key must be at least 8 characters', 'WEAK_API_KEY')
  return { host, port }
}

/** The OpenAI-compatible gateway and the status page, on a fastify server; `signal` aborts the start. */
export async function startGateway(o: GatewayOptions, { signal }: AbortOptions = {}): Promise<Gateway> {
  signal?.throwIfAborted()
  const { host, port } = checkListen(o.listen ?? DEFAULT_GATEWAY_LISTEN, o.apiKey)
  const key = o.apiKey ? Buffer.from(o.apiKey) : undefined
  const stats = new LiveStats()
  const ctx: GatewayContext = {
    client: o.client,
    stats,
    metrics: o.metrics,
    log: o.log,
    maxConcurrent: o.maxConcurrent ?? DEFAULT_GATEWAY_MAX_CONCURRENT,
    contextLength: o.contextLength,
    speculate: o.speculate
  }
  const limits = resolveConnectionLimits(o)
  const app = Fastify({
    loggerInstance: o.log.child({ component: 'http' }) as FastifyBaseLogger,
    bodyLimit: o.bodyLimit ?? DEFAULT_GATEWAY_BODY_LIMIT_BYTES,
    // issue #39: deadlines for requests slow to arrive (fastify's defaults turn Node's off)
    http: httpServerOptions(limits),
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // One line per generation (generation.ts) says more than fastify's two per request.
    logController: new LogController({ disableRequestLogging: true })
  })

  capConnections(app.server, limits, (remote) => o.log.debug({ remote }, 'connection refused: per-IP cap'))

  app.addHook('onRequest', async (req) => {
    stats.requestsTotal++
    const len = Number(req.headers['content-length'] ?? 0)
    if (len > 0) o.metrics?.bytes('in', len)
    // The page's own files hold no data and a browser cannot send a bearer header when it
    // navigates; the page asks for the key and sends it with each /status.json poll.
    // Keyless, the gateway trusts whoever reaches loopback; a web page can reach it too through
    // DNS rebinding (its own name resolving to 127.0.0.1), which shows in the Host header.
    if (!key && !hostAllowed(req.headers.host)) {
      throw new ApiError(
        403,
        'Host not allowed: without --api-key the gateway answers only to localhost names.',
        'invalid_request_error',
        'host_not_allowed'
      )
    }
    const path = req.url.split('?')[0]
    if (!key || (req.method === 'GET' && (path in STATIC_FILES || path in BROWSER_FILES))) return
    // Anthropic's clients send the key as x-api-key (issue 37: /v1/messages)
    if (!keyMatches(req.headers.authorization, key) && !xApiKeyMatches(req.headers['x-api-key'], key)) {
      throw new ApiError(
        401,
        req.headers.authorization
          ? 'Incorrect API key provided. Send the key the gateway was started with as "Authorization: Bearer KEY".'
          : 'You didn\'t provide an API key. Send it as "Authorization: Bearer KEY".',
        'invalid_request_error',
        'invalid_api_key'
      )
    }
  })
  app.addHook('onSend', async (_req, reply, payload) => {
    if (typeof payload === 'string') o.metrics?.bytes('out', Buffer.byteLength(payload))
    reply.header('x-content-type-options', 'nosniff')
    return payload
  })

  app.setErrorHandler(async (err, req, reply) => {
    const api = toApiError(err)
    if (api.status >= 500) req.log.error({ err }, 'request failed')
    else req.log.debug({ err: api.message, status: api.status }, 'bad request')
    if (api.status === 401) reply.header('www-authenticate', 'Bearer realm="layerswarm"')
    // Anthropic's error shape on its endpoint, OpenAI's everywhere else
    if (req.url.startsWith('/v1/messages')) return reply.code(api.status).send(anthropicError(api))
    return reply.code(api.status).send(api.toJSON())
  })
  app.setNotFoundHandler(async (req, reply) => {
    const path = req.url.split('?')[0]
    const allowed = ROUTES[path] ?? (path.startsWith('/v1/models/') ? ['GET'] : undefined)
    if (allowed) {
      reply.header('allow', allowed.join(', '))
      const e = new ApiError(
        405,
        `Method ${req.method} is not allowed for ${path}; use ${allowed.join(' or ')}.`,
        'invalid_request_error',
        'method_not_allowed'
      )
      return reply.code(405).send(e.toJSON())
    }
    const e = new ApiError(404, `Invalid URL (${req.method} ${path})`, 'invalid_request_error', 'unknown_url')
    return reply.code(404).send(e.toJSON())
  })

  let url = ''
  registerOpenAiRoutes(app, { ctx, modelName: o.modelName, chat: o.chat, displayName: o.displayName })
  registerAnthropicRoutes(app, ctx, [o.modelName, o.client.modelId], o.chat)
  registerStatus(app, { ctx, modelName: o.modelName, listen: () => url, auth: key !== undefined })
  if (o.modelPath !== undefined)
    registerBrowserRoutes(app, {
      client: o.client,
      modelPath: o.modelPath,
      modelName: o.modelName,
      bootstrap: o.browserBootstrap,
      canaryBankPath: o.canaryBankPath,
      maxDownloads: o.maxModelDownloads
    })

  await app.listen({ host, port })
  if (signal?.aborted) {
    await app.close()
    signal.throwIfAborted()
  }
  const addr = app.server.address()
  const bound = typeof addr === 'object' && addr ? addr.port : port
  url = `http://${host.includes(':') ? `[${host}]` : host}:${bound}`
  return {
    url,
    modelName: o.modelName,
    app,
    stats,
    client: o.client,
    close: async () => {
      await app.close()
    }
  }
}
