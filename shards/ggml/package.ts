import { existsSync, readdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

/**
 * The ggml backends (issue 32) come prebuilt in node-llama-cpp's platform packages: each holds
 * libggml-base (the graph API), libggml (the backend registry), the CPU variants and at most one
 * GPU backend. They are installed on demand (`layerswarm backend install <flavour>`) into
 * $LAYERSWARM_HOME/backends, never by `npm install`: the CUDA ones weigh 181 + 357 MB. Pinned to
 * the release whose headers shards/native/ggml/include holds.
 */
export const GGML_PACKAGE_VERSION = '3.21.1'

/** The `--backend` values that run ggml, and the package flavour each needs. */
export const GGML_BACKENDS = ['ggml-cpu', 'ggml-cuda', 'ggml-vulkan', 'ggml-metal'] as const
export type GgmlBackend = (typeof GGML_BACKENDS)[number]
export type BackendFlavour = 'cpu' | 'cuda' | 'vulkan' | 'metal'
export const BACKEND_FLAVOURS: readonly BackendFlavour[] = ['cpu', 'cuda', 'vulkan', 'metal']

export function flavourOf(backend: GgmlBackend): BackendFlavour {
  return backend.slice('ggml-'.length) as BackendFlavour
}

/** The registry name ggml gives each GPU backend's devices (ggml_backend_reg_name). */
export const GGML_REGISTRY_NAMES: Record<GgmlBackend, string> = {
  'ggml-cpu': 'CPU',
  'ggml-cuda': 'CUDA',
  'ggml-vulkan': 'Vulkan',
  'ggml-metal': 'Metal'
}

/**
 * The npm package holding `flavour` for a platform, or null when node-llama-cpp ships none. Every
 * GPU package also carries the CPU backend, so ggml-cpu runs from whichever one is installed.
 */
export function backendPackage(
  flavour: BackendFlavour,
  platform: NodeJS.Platform = process.platform,
  arch: string = process.arch
): string | null {
  const scope = '@node-llama-cpp/'
  if (platform === 'linux' && arch === 'x64')
    return scope + { cpu: 'linux-x64', vulkan: 'linux-x64-vulkan', cuda: 'linux-x64-cuda', metal: '' }[flavour] || null
  if (platform === 'linux' && arch === 'arm64') return flavour === 'cpu' ? `${scope}linux-arm64` : null
  if (platform === 'darwin' && arch === 'arm64')
    return flavour === 'cpu' || flavour === 'metal' ? `${scope}mac-arm64-metal` : null
  if (platform === 'darwin' && arch === 'x64') return flavour === 'cpu' ? `${scope}mac-x64` : null
  if (platform === 'win32' && arch === 'x64')
    return scope + { cpu: 'win-x64', vulkan: 'win-x64-vulkan', cuda: 'win-x64-cuda', metal: '' }[flavour] || null
  return null
}

/**
 * Where `backend install` puts the packages: $LAYERSWARM_BACKENDS_DIR when set (one install shared
 * by several homes, e.g. the test suite's scratch homes), else $LAYERSWARM_HOME/backends, else
 * ~/.layerswarm/backends.
 */
export function backendsDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.LAYERSWARM_BACKENDS_DIR) return env.LAYERSWARM_BACKENDS_DIR
  return join(env.LAYERSWARM_HOME || join(homedir(), '.layerswarm'), 'backends')
}

/** The libraries of one installed package: the folder and the two files span-load.cc opens. */
export interface GgmlLibraries {
  readonly dir: string
  readonly base: string
  readonly ggml: string
  /** The package it came from (or the LAYERSWARM_GGML_DIR folder). */
  readonly source: string
}

/** libggml-base and libggml (named libggml.so, libggml.v0.4.0.so, libggml.vulkan.v0.4.0.so, …) in `dir`. */
export function librariesIn(dir: string, source: string = dir): GgmlLibraries | null {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return null
  }
  const base = names.find((n) => /^libggml-base\.(so|dylib)$/.test(n))
  const ggml = names.find((n) => /^libggml\.([\w.]+\.)?(so|dylib)$/.test(n))
  return base && ggml ? { dir, base: join(dir, base), ggml: join(dir, ggml), source } : null
}

/** The installed package's bins/<platform> folder under a node_modules folder, if any. */
function packageLibraries(nodeModules: string, pkg: string): GgmlLibraries | null {
  const bins = join(nodeModules, pkg, 'bins')
  if (!existsSync(bins)) return null
  for (const sub of readdirSync(bins)) {
    const found = librariesIn(join(bins, sub), pkg)
    if (found) return found
  }
  return null
}

/**
 * The libraries for `flavour`: LAYERSWARM_GGML_DIR when set (a folder holding them, e.g. a ggml
 * built from source), else the package `backend install` put in backendsDir(). For ggml-cpu,
 * any installed package will do (each carries the CPU backend).
 */
export function findGgmlLibraries(flavour: BackendFlavour, env: NodeJS.ProcessEnv = process.env): GgmlLibraries | null {
  if (env.LAYERSWARM_GGML_DIR) return librariesIn(env.LAYERSWARM_GGML_DIR)
  const nodeModules = join(backendsDir(env), 'node_modules')
  const wanted = backendPackage(flavour)
  const order = flavour === 'cpu' ? BACKEND_FLAVOURS.map((f) => backendPackage(f)) : [wanted]
  for (const pkg of order) {
    const found = pkg ? packageLibraries(nodeModules, pkg) : null
    if (found) return found
  }
  return null
}

/** The command that installs `flavour`, for BACKEND_UNAVAILABLE lines. */
export function installHint(flavour: BackendFlavour): string {
  const pkg = backendPackage(flavour)
  return pkg
    ? `run \`layerswarm backend install ${flavour}\` (${pkg}@${GGML_PACKAGE_VERSION})`
    : `node-llama-cpp ships no ${flavour} backend for ${process.platform}-${process.arch}`
}
