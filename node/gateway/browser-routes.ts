/**
 * What the browser client needs from the gateway (docs/browser.md): the chat page, the SDK
 * bundle (dist/browser/, built by scripts/build-browser.mjs), the model's bytes with HTTP Range
 * support (RFC 9110 §14: the client fetches its edge tensors only) and `/browser.json` (model id,
 * edge split and the swarm's WebSocket bootstrap addresses). Every answer carries COOP/COEP, so
 * the page is cross-origin isolated: the WebAssembly kernels need shared memory.
 */

import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { AbortOptions } from '@libp2p/interface'
import type { FastifyInstance, FastifyReply } from 'fastify'
import type { LayerswarmClient } from '../../client/index.js'
import { DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS } from '../options.js'
import { packageRoot } from '../paths.js'
import { ApiError } from './errors.js'
import { staticDir } from './status.js'

export interface BrowserRoutesInit {
  readonly client: LayerswarmClient
  /** The GGUF the swarm serves (a .bin model has no browser client: the page says so). */
  readonly modelPath: string
  readonly modelName: string
  /** ws:// multiaddrs to hand the page; default: the /ws addresses of the peers the gateway knows. */
  readonly bootstrap?: readonly string[]
  /** A sealed canary bank to serve at /canary-bank (its key is never served: the page is given it). */
  readonly canaryBankPath?: string
  /** Downloads of /model.gguf at once (default DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS); more get 503. */
  readonly maxDownloads?: number
}

/** Seconds a refused /model.gguf download is told to wait (Retry-After). */
const MODEL_DOWNLOAD_RETRY_AFTER_S = 5

/** Page files: no key needed (they hold no data), like the status page's. */
export const BROWSER_FILES: Record<string, { file: string; type: string; dir: 'static' | 'bundle' }> = {
  '/chat': { file: 'chat.html', type: 'text/html; charset=utf-8', dir: 'static' },
  '/chat.js': { file: 'chat.js', type: 'text/javascript; charset=utf-8', dir: 'static' },
  '/browser/layerswarm-worker.js': { file: 'layerswarm-worker.js', type: 'text/javascript; charset=utf-8', dir: 'bundle' }
}

/** Routes with data (the key applies when the gateway has one). */
export const BROWSER_DATA_ROUTES = ['/model.gguf', '/browser.json', '/canary-bank']

export function bundleDir(): string {
  return join(packageRoot(), 'dist', 'browser')
}

function isolate(reply: FastifyReply): FastifyReply {
  return reply
    .header('cross-origin-opener-policy', 'same-origin')
    .header('cross-origin-embedder-policy', 'require-corp')
    .header('cross-origin-resource-policy', 'same-origin')
}

/** [start, end] (inclusive) of a single-range `Range` header over `size` bytes; null: whole file. */
export function parseRange(header: string | undefined, size: number): [number, number] | null {
  if (header === undefined) return null
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  const unsatisfiable = (): never => {
    throw new ApiError(
      416,
      `Range "${header}" is not one satisfiable byte range of ${size} bytes`,
      'invalid_request_error',
      'range_not_satisfiable'
    )
  }
  if (!m || (m[1] === '' && m[2] === '')) return unsatisfiable()
  if (m[1] === '') {
    const n = Number(m[2])
    if (n === 0) return unsatisfiable()
    return [Math.max(0, size - n), size - 1]
  }
  const start = Number(m[1])
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1)
  if (start >= size || end < start) return unsatisfiable()
  return [start, end]
}

/** The /ws addresses (with /p2p/<id>) of the peers the gateway's client is connected to or has seen. */
export async function wsBootstrap(client: LayerswarmClient, { signal }: AbortOptions = {}): Promise<string[]> {
  const out: string[] = []
  signal?.throwIfAborted()
  for (const peer of await client.host.peerStore.all()) {
    for (const { multiaddr } of peer.addresses) {
      const s = multiaddr.toString()
      if (!s.includes('/ws')) continue
      out.push(s.includes('/p2p/') ? s : `${s}/p2p/${peer.id.toString()}`)
    }
  }
  return out
}

export function registerBrowserRoutes(app: FastifyInstance, init: BrowserRoutesInit): void {
  for (const [path, { file, type, dir }] of Object.entries(BROWSER_FILES)) {
    app.get(path, async (_req, reply) => {
      const at = join(dir === 'static' ? staticDir() : bundleDir(), file)
      if (!existsSync(at))
        throw new ApiError(404, `${file} is not built: run npm run build:browser`, 'invalid_request_error', 'not_built')
      return isolate(reply).type(type).header('cache-control', 'no-cache').send(readFileSync(at))
    })
  }

  app.get('/browser.json', async (_req, reply) => {
    const { client } = init
    const bootstrap = init.bootstrap ? [...init.bootstrap] : await wsBootstrap(client)
    return isolate(reply)
      .header('cache-control', 'no-store')
      .send({
        model: { name: init.modelName, id: client.modelId, url: '/model.gguf', gguf: init.modelPath.endsWith('.gguf') },
        edge: { first: client.span.first[1], last: client.span.last[1] - client.span.last[0] },
        canaryBank: init.canaryBankPath !== undefined ? '/canary-bank' : null,
        bootstrap
      })
  })

  app.get('/canary-bank', async (_req, reply) => {
    if (init.canaryBankPath === undefined)
      throw new ApiError(
        404,
        'this gateway has no canary bank (layerswarm api --canary-bank)',
        'invalid_request_error',
        'no_bank'
      )
    // sealed (AES-256-GCM): useless without the key, which only the user gives the page
    return isolate(reply)
      .type('application/octet-stream')
      .header('cache-control', 'no-store')
      .send(readFileSync(init.canaryBankPath))
  })

  // issue #39: each download holds a file stream and the uplink until the client has it all; a
  // cap keeps a few clients from taking every one. Counted until the response closes (finished
  // or aborted).
  const maxDownloads = init.maxDownloads ?? DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS
  let downloads = 0
  app.get('/model.gguf', async (req, reply) => {
    const size = statSync(init.modelPath).size
    const range = parseRange(req.headers.range, size)
    if (downloads >= maxDownloads) {
      reply.header('retry-after', String(MODEL_DOWNLOAD_RETRY_AFTER_S))
      throw new ApiError(
        503,
        `${downloads} downloads of the model are under way, the most this gateway serves at once; retry in ${MODEL_DOWNLOAD_RETRY_AFTER_S} s`,
        'service_unavailable',
        'too_many_downloads'
      )
    }
    downloads++
    reply.raw.once('close', () => {
      downloads--
    })
    isolate(reply).header('accept-ranges', 'bytes').type('application/octet-stream').header('cache-control', 'no-cache')
    if (!range) return reply.header('content-length', size).send(createReadStream(init.modelPath))
    const [start, end] = range
    return reply
      .code(206)
      .header('content-range', `bytes ${start}-${end}/${size}`)
      .header('content-length', end - start + 1)
      .send(createReadStream(init.modelPath, { start, end }))
  })
}
