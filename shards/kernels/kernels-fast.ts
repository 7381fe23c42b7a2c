import { availableParallelism } from 'node:os'
import { KernelsUnavailableError } from '../errors.js'
import { loadNativeAddon } from '../native/load.js'
import { chooseKernels } from './kernel-calibration.js'
import type { Kernels } from './kernels.js'
import { createReferenceKernels } from './kernels-ref.js'
import { createWasmKernels, type FastKernels } from './wasm/wasm-kernels.js'
import { wasmKernelsAvailable } from './wasm/wasm-module.js'

export type { FastKernels } from './wasm/wasm-kernels.js'

export type KernelKind = 'auto' | 'reference' | 'wasm' | 'native'

export interface FastKernelOptions {
  /** Threads including the caller's (default: os.availableParallelism()). */
  readonly threads?: number
  /** Use the native addon for batched matmuls when it loads (default true). */
  readonly native?: boolean
  /** Addon file to load instead of the built one (tests point it at a missing file). */
  readonly nativePath?: string | null
  /** Whole decode blocks in one native call when the addon has them (default true). */
  readonly fusedBlock?: boolean
  /** Huge pages under the kernel memory where the OS honours the advice (default true). */
  readonly hugePages?: boolean
  /** Weights the WebAssembly heap takes at most (default 3 GiB); past it, native buffers. */
  readonly heapWeightBytes?: number
}

export interface SelectKernelsOptions extends Omit<FastKernelOptions, 'native'> {
  readonly kind?: KernelKind
}

/**
 * WebAssembly SIMD kernels on worker threads, with the native addon taking batched matmuls
 * (T >= 8) when it is built and loads. Both engines produce the same bits (see shards/asm/).
 */
export function createFastKernels(options: FastKernelOptions = {}): FastKernels {
  const threads = options.threads ?? availableParallelism()
  const addon =
    options.native === false ? null : loadNativeAddon(options.nativePath === undefined ? undefined : options.nativePath)
  return createWasmKernels({
    threads,
    native: addon,
    fusedBlock: options.fusedBlock,
    hugePages: options.hugePages,
    heapWeightBytes: options.heapWeightBytes
  })
}

/**
 * The best kernel set this machine runs: native+WebAssembly, else WebAssembly, else the
 * TypeScript reference. An explicit kind that cannot run throws KernelsUnavailableError.
 * Synchronous: the module compiles synchronously and workers start in the background.
 */
export function selectKernels(options: SelectKernelsOptions = {}): Kernels {
  const kind = options.kind ?? 'auto'
  if (kind === 'reference') return createReferenceKernels()
  if (!wasmKernelsAvailable()) {
    if (kind === 'auto') return createReferenceKernels()
    throw new KernelsUnavailableError('WebAssembly SIMD with shared memory is not available in this runtime')
  }
  if (kind === 'native') {
    const addon = loadNativeAddon(options.nativePath === undefined ? undefined : options.nativePath)
    if (!addon) throw new KernelsUnavailableError('native kernel addon is not built or does not load (npm run build:native)')
  }
  const k = createFastKernels({ threads: options.threads, nativePath: options.nativePath, native: kind !== 'wasm' })
  // `auto` with the addon: each dtype and shape class on the engine this machine measured
  // faster (kernel-calibration.ts, cached per machine); an explicit `native` keeps the addon.
  if (kind === 'auto' && k.hasNative)
    chooseKernels(k, loadNativeAddon(options.nativePath === undefined ? undefined : options.nativePath))
  return k
}
