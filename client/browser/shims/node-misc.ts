/**
 * node:path, node:url, node:os, node:events, node:module and node:worker_threads in the browser
 * bundle: what the SDK's modules call at load time works (paths are plain strings, one kernel
 * thread); anything that needs Node throws NotInBrowserError.
 */
import { NotInBrowserError } from '../errors.js'

// node:path (POSIX)
export const sep = '/'
export function dirname(p: string): string {
  const i = p.replace(/\/+$/, '').lastIndexOf('/')
  return i < 0 ? '.' : i === 0 ? '/' : p.slice(0, i)
}
export function join(...parts: string[]): string {
  return parts
    .filter((s) => s.length > 0)
    .join('/')
    .replace(/\/+/g, '/')
}
export const resolve = join
export const basename = (p: string): string => p.slice(p.lastIndexOf('/') + 1)
export function extname(p: string): string {
  const b = basename(p)
  const i = b.lastIndexOf('.')
  return i <= 0 ? '' : b.slice(i)
}

// node:url: a module's URL in the bundle is http(s); its "path" is the URL's path
export const fileURLToPath = (u: string | URL): string => new URL(String(u)).pathname
export const pathToFileURL = (p: string): URL => new URL(`file://${p}`)

// node:os
export const endianness = (): 'LE' | 'BE' => (new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 'LE' : 'BE')
export const availableParallelism = (): number =>
  (globalThis as unknown as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency ?? 1
export const cpus = (): unknown[] => Array.from({ length: availableParallelism() }, () => ({}))
export const tmpdir = (): string => '/tmp'
export const homedir = (): string => '/'
export const platform = (): string => 'browser'
/** A page sees no interfaces: the dial policy then allows private addresses only as bootstrap hosts. */
export const networkInterfaces = (): Record<string, never[]> => ({})

// node:events: listener limits are a Node warning only
export const setMaxListeners = (): void => {}

// node:module
export function createRequire(): (id: string) => never {
  return (id) => {
    throw new NotInBrowserError(`require(${id}) is not available in the browser`)
  }
}

// node:worker_threads: the browser client runs its kernels on one thread (client/browser/options.ts)
export class Worker {
  constructor() {
    throw new NotInBrowserError('kernel worker threads are not available in the browser; use threads: 1')
  }
}
export const isMainThread = true
export const parentPort = null
export const workerData = null
