import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { BackendUnavailableError } from '../errors.js'
import { nativeAddonPath } from '../native/load.js'
import {
  type BackendFlavour,
  findGgmlLibraries,
  GGML_REGISTRY_NAMES,
  type GgmlBackend,
  type GgmlLibraries,
  installHint
} from './package.js'

/** A device ggml found (ggml_backend_dev_get). */
export interface GgmlDevice {
  readonly index: number
  readonly name: string
  readonly description: string
  /** Its registry: CPU, CUDA, Vulkan, Metal, … */
  readonly backend: string
  readonly type: 'cpu' | 'gpu' | 'igpu' | 'accel'
  readonly freeBytes: number
  readonly totalBytes: number
}

/** What shards/native/ggml/span-addon.cc gives a span (the checks are on the TypeScript side). */
export interface NativeGgmlSpan {
  openSession(id: number, maxLength: number): void
  closeSession(id: number): boolean
  forward(x: Float32Array, ids: Int32Array, rows: Int32Array, startPos: Int32Array, dim: number): void
  exportKv(id: number, from: number, n: number, out: Uint8Array): void
  importKv(id: number, from: number, n: number, data: Uint8Array): void
  close(): void
  info(): { weightBytes: number; device: string; kvRowBytes: number }
}

interface GgmlAddon {
  load(base: string, ggml: string, dir: string): string | null
  devices(): GgmlDevice[]
  Span: new (config: object) => NativeGgmlSpan
}

/** The loaded ggml: its libraries, devices and the addon's Span class. */
export interface GgmlRuntime {
  readonly libraries: GgmlLibraries
  readonly devices: readonly GgmlDevice[]
  readonly Span: GgmlAddon['Span']
}

let loaded: GgmlRuntime | null = null

/** build/layerswarm_ggml.node beside the kernel addon (shards/native/ggml/build.mjs). */
export function ggmlAddonPath(): string | null {
  const kernels = nativeAddonPath(undefined)
  return kernels ? join(dirname(kernels), 'layerswarm_ggml.node') : null
}

/**
 * ggml, loaded once per process (its libraries are opened RTLD_GLOBAL, so a process holds one
 * package's set: the first flavour loaded wins). BackendUnavailableError, naming what to
 * install or build, when the addon or the libraries are missing.
 */
export function loadGgml(flavour: BackendFlavour, env: NodeJS.ProcessEnv = process.env): GgmlRuntime {
  if (loaded) return loaded
  const path = ggmlAddonPath()
  if (!path || !existsSync(path))
    throw new BackendUnavailableError('the ggml span addon is not built (run `npm run build:native` with g++ installed)')
  const libraries = findGgmlLibraries(flavour, env)
  if (!libraries) throw new BackendUnavailableError(`ggml ${flavour} is not installed: ${installHint(flavour)}`)
  const addon = createRequire(import.meta.url)(path) as GgmlAddon
  const error = addon.load(libraries.base, libraries.ggml, libraries.dir)
  if (error) throw new BackendUnavailableError(`${error}`)
  loaded = { libraries, devices: addon.devices(), Span: addon.Span }
  return loaded
}

/** The devices of one ggml backend, in ggml's order (`--device N` indexes this list). */
export function devicesOf(runtime: GgmlRuntime, backend: GgmlBackend): GgmlDevice[] {
  return runtime.devices.filter((d) => d.backend === GGML_REGISTRY_NAMES[backend])
}

/**
 * A Vulkan driver that renders on the CPU (Mesa's lavapipe reports "llvmpipe", Google's
 * SwiftShader): ggml lists it as a GPU, but `auto` must not prefer it to the engine's kernels.
 */
export function isSoftwareDevice(d: GgmlDevice): boolean {
  return /llvmpipe|lavapipe|swiftshader/i.test(d.description)
}

/** Why ggml-vulkan lists no device, for the BACKEND_UNAVAILABLE line. */
const VULKAN_HINT =
  " (a Vulkan driver is needed: the GPU vendor's, or Mesa's lavapipe on the CPU, mesa-vulkan-drivers >= 25, exposed with GGML_VK_VISIBLE_DEVICES=0)"

/** Device `index` of `backend`, or BackendUnavailableError naming what was found instead. */
export function pickDevice(runtime: GgmlRuntime, backend: GgmlBackend, index = 0): GgmlDevice {
  const found = devicesOf(runtime, backend)
  const device = found[index]
  if (device) return device
  const all = runtime.devices.map((d) => `${d.backend}:${d.name}`).join(', ') || 'none'
  throw new BackendUnavailableError(
    found.length === 0
      ? `ggml found no ${GGML_REGISTRY_NAMES[backend]} device (devices: ${all}; from ${libraries(runtime)})${backend === 'ggml-vulkan' ? VULKAN_HINT : ''}`
      : `--device ${index} but ggml found ${found.length} ${GGML_REGISTRY_NAMES[backend]} device(s)`
  )
}

function libraries(runtime: GgmlRuntime): string {
  return runtime.libraries.source
}
