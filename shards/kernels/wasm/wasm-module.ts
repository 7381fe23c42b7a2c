import { KernelsUnavailableError } from '../../errors.js'
import { WASM_KERNELS_BASE64 } from './wasm-binary.js'

// The project compiles with lib ES2023 and @types/node 20, neither of which declares the
// WebAssembly namespace; these are the few members the kernels use.
export interface WasmModule {
  readonly __wasmModule?: never
}
export interface WasmMemory {
  readonly buffer: SharedArrayBuffer
  grow(pages: number): number
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => WasmModule
  Instance: new (module: WasmModule, imports: object) => { readonly exports: Record<string, unknown> }
  Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => WasmMemory
}

/** The runtime's WebAssembly object, or undefined where there is none. */
export const wasmApi = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly

let cached: WasmModule | null = null

/** Base64 to bytes in Node (Buffer) and in a browser worker (atob), so the kernels run in both. */
function base64Bytes(text: string): Uint8Array {
  if (typeof Buffer === 'function') return Buffer.from(text, 'base64')
  const binary = atob(text)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

/**
 * The compiled kernel module (SIMD + threads), compiled once per process. Synchronous
 * compilation is fine in Node and in a browser's Web Worker (the 4 KiB limit holds on a page's
 * main thread only, so the browser client runs its SDK in a worker); the Module is then shared
 * with every worker.
 */
export function wasmKernelsModule(): WasmModule {
  if (!wasmApi) throw new KernelsUnavailableError('WebAssembly is not available')
  if (!cached) cached = new wasmApi.Module(base64Bytes(WASM_KERNELS_BASE64))
  return cached
}

/** Whether this runtime can run the kernels: SIMD and shared memory validate and instantiate. */
export function wasmKernelsAvailable(): boolean {
  try {
    if (!wasmApi || typeof SharedArrayBuffer !== 'function') return false
    wasmKernelsModule()
    new wasmApi.Memory({ initial: 1, maximum: 2, shared: true })
    return true
  } catch {
    return false
  }
}
