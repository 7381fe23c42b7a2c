/**
 * The SDK in a browser (issue 19 item 4). The same LayerswarmClient as in Node, assembled from
 * browser parts: a libp2p host on WebSockets only (Noise, yamux, gossipsub as in Node), the
 * model's edge tensors fetched from a URL with HTTP range requests (model-url.ts), and the
 * edge blocks on the WebAssembly SIMD kernels (one thread: the Web Worker the SDK runs in).
 * Node-only modules (files, worker threads, the native addon, node:crypto) are replaced by the
 * bundler with the browser shims in shims/ (scripts/build-browser.mjs).
 */
import '../../protocol/polyfills.js'
import type { AbortOptions } from '@libp2p/interface'
import { createHost } from '../../protocol/index.js'
import { type Kernels, selectKernels } from '../../shards/index.js'
import { type ClientInit, LayerswarmClient } from '../client.js'
import { DEFAULT_EDGE_FIRST, DEFAULT_EDGE_LAST } from '../options.js'
import { BrowserClientError } from './errors.js'
import { openModelUrl } from './model-url.js'
import { BROWSER_KERNEL_THREADS } from './options.js'

export * from './errors.js'
export { fetchRange, mergeRanges, openModelUrl, PrefetchedBytes } from './model-url.js'

export interface BrowserClientInit extends Omit<ClientInit, 'model' | 'tokenizer' | 'kernels' | 'canaries'> {
  /** ws:// or wss:// multiaddrs (with /p2p/<id>) of swarm peers. */
  readonly bootstrap: readonly string[]
  /** URL of the GGUF; the server must answer Range requests (the gateway's /model.gguf does). */
  readonly modelUrl: string
  /** Extra headers on the model's range requests (e.g. Authorization for a gateway with a key). */
  readonly headers?: Record<string, string>
  /** 'wasm' (default) or 'reference' kernels for the edge blocks. */
  readonly kernels?: 'wasm' | 'reference'
}

export interface BrowserClient {
  readonly client: LayerswarmClient
  /** Bytes of the GGUF downloaded (header, edge tensors, model-id samples) and its size. */
  readonly fetchedBytes: number
  readonly totalBytes: number
  readonly kernels: string
  close(): Promise<void>
}

/** Fetch the edge of the model, join the swarm over WebSockets, and return a ready client. */
export async function createBrowserClient(init: BrowserClientInit, options: AbortOptions = {}): Promise<BrowserClient> {
  if (!Array.isArray(init.bootstrap) || init.bootstrap.length === 0)
    throw new BrowserClientError('bootstrap must list at least one ws:// multiaddr of a swarm peer')
  if (typeof init.modelUrl !== 'string' || init.modelUrl.length === 0)
    throw new BrowserClientError('modelUrl must be the URL of the GGUF the swarm serves')
  const { model, fetchedBytes, totalBytes } = await openModelUrl({
    url: init.modelUrl,
    edgeFirst: init.edgeFirst ?? DEFAULT_EDGE_FIRST,
    edgeLast: init.edgeLast ?? DEFAULT_EDGE_LAST,
    headers: init.headers,
    signal: options.signal
  })
  let kernels: Kernels | undefined
  try {
    kernels = selectKernels({ kind: init.kernels ?? 'wasm', threads: BROWSER_KERNEL_THREADS })
    const host = await createHost({ listen: [], bootstrap: [...init.bootstrap], transports: ['ws'], dialInsecure: true }, options)
    const { modelUrl: _url, headers: _headers, kernels: _kind, ...rest } = init
    const client = LayerswarmClient.fromModel(host, model, { ...rest, kernels, canaries: false })
    const own = kernels
    return {
      client,
      fetchedBytes,
      totalBytes,
      kernels: init.kernels ?? 'wasm',
      async close() {
        await client.close()
        own.close?.()
      }
    }
  } catch (err) {
    kernels?.close?.()
    model.close()
    throw err
  }
}
