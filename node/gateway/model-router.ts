import { timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { AbortOptions } from '@libp2p/interface'
import { hostAllowed } from '../daemon/index.js'
import { DEFAULT_GATEWAY_BODY_LIMIT_BYTES } from '../options.js'
import { anthropicError } from './anthropic-routes.js'
import { ApiError } from './errors.js'
import type { Gateway } from './server.js'
import { checkListen } from './server.js'

/**
 * One gateway address for several models (issue 33 item 5): the request's `model` picks which
 * model's gateway answers it. Each model keeps its own whole gateway (its SDK client, edge,
 * tokenizer, chat template, limits) on a loopback port; this front answers `/v1/models` with
 * every model, and passes each generation request, as it came and streaming as it goes, to the
 * gateway of the model it names. An unknown model gets OpenAI's 404 `model_not_found` (Anthropic's
 * `not_found_error` on /v1/messages). Other paths (the status page, /chat) go to the first model's gateway.
 */
export interface RoutedModel {
  /** The id clients pass as `model` (the file's name); the model id is accepted too. */
  readonly name: string
  readonly modelId: string
  /** Readable, from the GGUF metadata ("llama 293K F32"). */
  readonly displayName: string
  readonly gateway: Gateway
  /** Blocks the swarm serves of this model now, and of how many (the swarm view's coverage). */
  coverage(): { readonly blocksServed: number; readonly nLayers: number; readonly peers: number }
}

export interface ModelRouterOptions {
  readonly listen: string
  readonly apiKey?: string
  readonly models: readonly RoutedModel[]
  readonly bodyLimitBytes?: number
}

export interface ModelRouter {
  readonly url: string
  close(): Promise<void>
}

const GENERATION_PATHS = new Set(['/v1/completions', '/v1/chat/completions', '/v1/messages'])
const created = Math.floor(Date.now() / 1000)

export function modelObject(m: RoutedModel): Record<string, unknown> {
  const c = m.coverage()
  return {
    id: m.name,
    object: 'model',
    created,
    owned_by: 'layerswarm',
    layerswarm: { model_id: m.modelId, name: m.displayName, n_layers: c.nLayers, blocks_served: c.blocksServed, peers: c.peers }
  }
}

export async function startModelRouter(o: ModelRouterOptions, { signal }: AbortOptions = {}): Promise<ModelRouter> {
  signal?.throwIfAborted()
  const { host, port } = checkListen(o.listen, o.apiKey)
  const key = o.apiKey ? Buffer.from(o.apiKey) : undefined
  const limit = o.bodyLimitBytes ?? DEFAULT_GATEWAY_BODY_LIMIT_BYTES
  const byName = (id: unknown): RoutedModel | undefined => o.models.find((m) => m.name === id || m.modelId === id)
  const send = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'x-content-type-options': 'nosniff' })
    res.end(JSON.stringify(body))
  }
  const fail = (res: ServerResponse, path: string, e: ApiError): void =>
    send(res, e.status, path.startsWith('/v1/messages') ? anthropicError(e) : e.toJSON())

  /** The same door the gateways keep (server.ts): a key when one is set, else only localhost names. */
  const admitted = (req: IncomingMessage): ApiError | undefined => {
    if (!key)
      return hostAllowed(req.headers.host)
        ? undefined
        : new ApiError(
            403,
            'Host not allowed: without --api-key the gateway answers only to localhost names.',
            'invalid_request_error',
            'host_not_allowed'
          )
    const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim() ?? req.headers['x-api-key']
    const given = Buffer.from(typeof bearer === 'string' ? bearer : '')
    if (given.length === key.length && timingSafeEqual(given, key)) return undefined
    return new ApiError(
      401,
      'Incorrect or missing API key. Send it as "Authorization: Bearer KEY".',
      'invalid_request_error',
      'invalid_api_key'
    )
  }

  const proxy = (req: IncomingMessage, res: ServerResponse, to: Gateway, body?: Buffer): void => {
    const target = new URL(to.url)
    const up = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      }
    )
    // a client that goes away stops the generation it asked for (the gateway sees its request close)
    res.on('close', () => up.destroy())
    up.on('error', () => {
      if (!res.headersSent)
        fail(res, req.url ?? '', new ApiError(502, 'the model gateway did not answer', 'server_error', 'bad_gateway'))
      else res.destroy()
    })
    if (body !== undefined) up.end(body)
    else req.pipe(up)
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    const first = o.models[0].gateway
    if (path === '/v1/models' || path.startsWith('/v1/models/')) {
      const refused = admitted(req)
      if (refused) return fail(res, path, refused)
      if (req.method !== 'GET') return proxy(req, res, first) // its 405
      if (path === '/v1/models') return send(res, 200, { object: 'list', data: o.models.map(modelObject) })
      const m = byName(decodeURIComponent(path.slice('/v1/models/'.length)))
      if (m) return send(res, 200, modelObject(m))
      return fail(res, path, notFound(decodeURIComponent(path.slice('/v1/models/'.length)), o.models))
    }
    if (!GENERATION_PATHS.has(path) || req.method !== 'POST') return proxy(req, res, first)
    const chunks: Buffer[] = []
    let bytes = 0
    req.on('data', (c: Buffer) => {
      bytes += c.length
      if (bytes <= limit + 1) chunks.push(c)
    })
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      let model: unknown
      try {
        model = (JSON.parse(body.toString('utf8')) as { model?: unknown } | null)?.model
      } catch {
        model = undefined
      }
      if (bytes > limit)
        return fail(res, path, new ApiError(413, 'Request body too large', 'invalid_request_error', 'request_too_large'))
      // not JSON or without a model: the first gateway gives its exact error
      if (typeof model !== 'string' || model === '') return proxy(req, res, first, body)
      const refused = admitted(req)
      if (refused) return fail(res, path, refused)
      const m = byName(model)
      if (!m) return fail(res, path, notFound(model, o.models))
      proxy(req, res, m.gateway, body)
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const bound = (server.address() as AddressInfo).port
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

function notFound(id: string, models: readonly RoutedModel[]): ApiError {
  return new ApiError(
    404,
    `The model '${id}' does not exist; this gateway serves ${models.map((m) => `'${m.name}'`).join(', ')}.`,
    'invalid_request_error',
    'model_not_found',
    'model'
  )
}
