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
import { LayerswarmClient } from '../client.js'
import type { ClientInit } from '../client-types.js'
import { DEFAULT_SECRET_ROWS } from '../head/index.js'
import { DEFAULT_EDGE_FIRST, DEFAULT_EDGE_LAST } from '../options.js'
import { edgeOnlyModel } from '../verification/canaries/canary-bank-init.js'
import { BrowserClientError, ModelFetchError } from './errors.js'
import { openModelUrl } from './model-url.js'
import { BROWSER_KERNEL_THREADS } from './options.js'
import { registerBrowserFile } from './shims/node-fs.js'

export * from './errors.js'
export { fetchRange, mergeRanges, openModelUrl, PrefetchedBytes } from './model-url.js'

/** A sealed canary bank (`layerswarm canary build`) at a URL, and its 32-byte key (kept in the tab). */
export interface BrowserCanaryBank {
  readonly url: string
  readonly key: Uint8Array
}

export interface BrowserClientInit extends Omit<ClientInit, 'model' | 'tokenizer' | 'kernels' | 'canaryBank'> {
  /** ws:// or wss:// multiaddrs (with /p2p/<id>) of swarm peers. */
  readonly bootstrap: readonly string[]
  /** URL of the GGUF; the server must answer Range requests (the gateway's /model.gguf does). */
  readonly modelUrl: string
  /** Extra headers on the model's range requests (e.g. Authorization for a gateway with a key). */
  readonly headers?: Record<string, string>
  /** 'wasm' (default) or 'reference' kernels for the edge blocks. */
  readonly kernels?: 'wasm' | 'reference'
  /**
   * Canaries need reference outputs for the blocks the tab does not hold: a canary bank. Without
   * one, canaries are off (`canaries` is ignored); with one, they run as in Node (default rate).
   */
  readonly canaryBank?: BrowserCanaryBank
}

let banks = 0

/** Fetch a sealed bank and make it readable to canary/canary-bank.ts (it opens it with the key). */
async function fetchBank(
  bank: BrowserCanaryBank,
  headers: Record<string, string> | undefined,
  signal?: AbortSignal
): Promise<{ path: string; key: Uint8Array }> {
  let res: Response
  try {
    res = await fetch(bank.url, { headers, signal })
  } catch (err) {
    throw new ModelFetchError(`cannot fetch the canary bank ${bank.url}: ${(err as Error).message}`, { cause: err })
  }
  if (!res.ok) throw new ModelFetchError(`the canary bank ${bank.url} answered HTTP ${res.status}`)
  const path = `/layerswarm-memory/canary-bank-${++banks}`
  registerBrowserFile(path, new Uint8Array(await res.arrayBuffer()))
  return { path, key: bank.key }
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
  // the head on a peer (issue #35): the last block runs there too, and of the head only rows come
  const remoteHead = init.head === 'remote'
  const edgeLast = remoteHead ? 0 : (init.edgeLast ?? DEFAULT_EDGE_LAST)
  const { model, fetchedBytes, totalBytes, headReadable } = await openModelUrl({
    url: init.modelUrl,
    edgeFirst: init.edgeFirst ?? DEFAULT_EDGE_FIRST,
    edgeLast,
    headers: init.headers,
    signal: options.signal,
    ...(remoteHead ? { headSecretRows: init.headSecretRows ?? DEFAULT_SECRET_ROWS } : {})
  })
  let kernels: Kernels | undefined
  try {
    const bank = init.canaryBank ? await fetchBank(init.canaryBank, init.headers, options.signal) : undefined
    kernels = selectKernels({ kind: init.kernels ?? 'wasm', threads: BROWSER_KERNEL_THREADS })
    const host = await createHost({ listen: [], bootstrap: [...init.bootstrap], transports: ['ws'], dialInsecure: true }, options)
    const { modelUrl: _url, headers: _headers, kernels: _kind, canaryBank: _bank, ...rest } = init
    const n = model.config.nLayers
    // with a bank, the tab is a thin client: a touch of a block it does not hold is a typed error
    const held = bank ? edgeOnlyModel(model, init.edgeFirst ?? DEFAULT_EDGE_FIRST, n - edgeLast) : model
    const client = LayerswarmClient.fromModel(
      host,
      held,
      { ...rest, edgeLast, kernels, ...(bank ? { canaryBank: bank, canaries: init.canaries ?? {} } : { canaries: false }) },
      headReadable
    )
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
