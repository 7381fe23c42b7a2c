/**
 * Request deadlines and connection caps of the gateway's HTTP server (issue #39: twenty keyed
 * clients trickling request bodies held their connections for 80 s and more; fastify disables
 * Node's request timeout by default). Node's own HTTP timeouts do the cutting: `requestTimeout`
 * runs from a request's first byte until its body is complete, so an answer being streamed
 * (SSE tokens, /model.gguf) is never cut by it, only requests that are slow to arrive.
 */
import type { Server, ServerOptions } from 'node:http'
import type { Socket } from 'node:net'
import {
  DEFAULT_GATEWAY_HEADERS_TIMEOUT_MS,
  DEFAULT_GATEWAY_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_GATEWAY_MAX_CONNECTIONS,
  DEFAULT_GATEWAY_MAX_CONNECTIONS_PER_IP,
  DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS,
  GATEWAY_TIMEOUT_CHECK_INTERVAL_MS
} from '../options.js'
import { GatewayConfigError } from './errors.js'

export interface ConnectionLimits {
  /** A whole request (headers and body) must arrive within this; then 408 and close. */
  readonly requestTimeoutMs?: number
  /** Connections held at once; more are closed on arrival. */
  readonly maxConnections?: number
  /** Connections one remote address holds at once; more are closed on arrival. */
  readonly maxConnectionsPerIp?: number
}

export interface ResolvedConnectionLimits {
  readonly requestTimeoutMs: number
  readonly headersTimeoutMs: number
  readonly keepAliveTimeoutMs: number
  readonly maxConnections: number
  readonly maxConnectionsPerIp: number
}

function positiveInt(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 1) throw new GatewayConfigError(`${what} must be a whole number ≥ 1, got ${n}`, 'BAD_LIMIT')
  return n
}

/** The limits with their defaults; throws GatewayConfigError (BAD_LIMIT) on a value that is not a whole number ≥ 1. */
export function resolveConnectionLimits(o: ConnectionLimits): ResolvedConnectionLimits {
  const requestTimeoutMs = positiveInt(o.requestTimeoutMs ?? DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS, 'request timeout (ms)')
  return {
    requestTimeoutMs,
    // Node refuses a headers timeout above the request timeout
    headersTimeoutMs: Math.min(DEFAULT_GATEWAY_HEADERS_TIMEOUT_MS, requestTimeoutMs),
    keepAliveTimeoutMs: DEFAULT_GATEWAY_KEEP_ALIVE_TIMEOUT_MS,
    maxConnections: positiveInt(o.maxConnections ?? DEFAULT_GATEWAY_MAX_CONNECTIONS, 'max connections'),
    maxConnectionsPerIp: positiveInt(o.maxConnectionsPerIp ?? DEFAULT_GATEWAY_MAX_CONNECTIONS_PER_IP, 'max connections per IP')
  }
}

/** node:http options for the server fastify makes (fastify passes `http` through to createServer). */
export function httpServerOptions(l: ResolvedConnectionLimits): ServerOptions {
  return {
    requestTimeout: l.requestTimeoutMs,
    headersTimeout: l.headersTimeoutMs,
    keepAliveTimeout: l.keepAliveTimeoutMs,
    // Node looks for expired requests this often (its default, 30 s, would let a deadline slip by as much)
    connectionsCheckingInterval: Math.min(GATEWAY_TIMEOUT_CHECK_INTERVAL_MS, l.requestTimeoutMs)
  }
}

/**
 * Close connections beyond the caps as they arrive: all of them past `maxConnections` (Node's
 * own `server.maxConnections`), and one address's past `maxConnectionsPerIp`. `onRefused` is
 * told each refusal (for the log).
 */
export function capConnections(server: Server, l: ResolvedConnectionLimits, onRefused?: (remote: string) => void): void {
  server.maxConnections = l.maxConnections
  const perIp = new Map<string, number>()
  server.on('connection', (socket: Socket) => {
    const ip = socket.remoteAddress ?? ''
    const n = (perIp.get(ip) ?? 0) + 1
    if (n > l.maxConnectionsPerIp) {
      onRefused?.(ip)
      socket.destroy()
      return
    }
    perIp.set(ip, n)
    socket.once('close', () => {
      const left = (perIp.get(ip) ?? 1) - 1
      if (left <= 0) perIp.delete(ip)
      else perIp.set(ip, left)
    })
  })
}
