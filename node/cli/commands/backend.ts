import { spawnSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { Argument, type Command } from 'commander'
import {
  BACKEND_FLAVOURS,
  type BackendFlavour,
  backendPackage,
  backendsDir,
  blocksForDevice,
  type DeviceFit,
  findGgmlLibraries,
  firstAutoGpu,
  GGML_PACKAGE_VERSION,
  ggmlAddonPath,
  isGgmlBackend,
  isSoftwareDevice,
  loadGgml
} from '../../../shards/ggml/index.js'
import { BackendUnavailableError, KV_DTYPES, type KvDType, type ModelFile, openModelFile } from '../../../shards/index.js'

/**
 * Issue 32: the ggml backends install on demand, not with `npm install` (the CUDA packages are
 * 181 + 357 MB). npm itself fetches the platform package (integrity-checked, with its progress
 * on a terminal) into $LAYERSWARM_HOME/backends, pinned to the node-llama-cpp release whose
 * headers the span addon was compiled against.
 */
export function installBackend(flavour: BackendFlavour, env: NodeJS.ProcessEnv = process.env): string {
  const pkg = backendPackage(flavour)
  if (!pkg)
    throw new BackendUnavailableError(`node-llama-cpp ships no ${flavour} backend for ${process.platform}-${process.arch}`)
  const dir = backendsDir(env)
  mkdirSync(dir, { recursive: true })
  process.stderr.write(`installing ${pkg}@${GGML_PACKAGE_VERSION} into ${dir} (npm) …\n`)
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const args = [
    'install',
    '--prefix',
    dir,
    '--save-exact',
    '--no-audit',
    '--no-fund',
    '--no-package-lock',
    `${pkg}@${GGML_PACKAGE_VERSION}`
  ]
  const run = spawnSync(npm, args, { stdio: ['ignore', 'inherit', 'inherit'], env })
  if (run.error || run.status !== 0)
    throw new BackendUnavailableError(
      `npm could not install ${pkg}@${GGML_PACKAGE_VERSION}: ${run.error?.message ?? `exit status ${run.status}`}`
    )
  if (!findGgmlLibraries(flavour, { ...env, LAYERSWARM_GGML_DIR: '' }))
    throw new BackendUnavailableError(`${pkg} installed but holds no ggml libraries for this platform`)
  return pkg
}

/** The ggml devices this machine has, one line each (`doctor`, `backend list`); why none otherwise. */
export function ggmlDeviceLines(): string[] {
  if (!ggmlAddonPath()) return ['ggml: the span addon is not built']
  const installed = BACKEND_FLAVOURS.filter((f) => findGgmlLibraries(f) !== null)
  if (installed.length === 0) return ['ggml: no backend installed (`layerswarm backend install cpu|vulkan|cuda|metal`)']
  try {
    // One package per process (its libraries load RTLD_GLOBAL): a GPU one when installed, as
    // it carries the CPU backend too.
    const runtime = loadGgml(installed.find((f) => f !== 'cpu') ?? 'cpu')
    const missing = BACKEND_FLAVOURS.filter((f) => !installed.includes(f) && backendPackage(f))
    const backends = `ggml backends installed: ${installed.join(', ')}${missing.length ? `; installable: ${missing.join(', ')} (\`layerswarm backend install <flavour>\`)` : ''}`
    return [
      backends,
      ...runtime.devices.map(
        (d) =>
          `ggml ${d.backend} device ${d.index}: ${d.description} (${d.type}${isSoftwareDevice(d) ? ', software' : ''}, ${Math.round(d.freeBytes / 2 ** 20)} of ${Math.round(d.totalBytes / 2 ** 20)} MiB free) from ${runtime.libraries.source}`
      )
    ]
  } catch (e) {
    return [`ggml: ${(e as Error).message}`]
  }
}

/** The value of `--name v` or `--name=v` among `node start` arguments `join` passes on. */
function optionValue(args: readonly string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === name) return args[i + 1]
    if (args[i].startsWith(`${name}=`)) return args[i].slice(name.length + 1)
  }
  return undefined
}

/**
 * Issue 32: `join` without `--num-blocks`, on a GPU (`--backend ggml-cuda|vulkan|metal`, or
 * `auto` where an installed GPU backend has a hardware GPU), serves as many blocks as the
 * device's free memory holds (blocksForDevice), not half the model. null: not on a GPU, so
 * join keeps its default. A named GPU backend that is missing, or too small for one block, is
 * BackendUnavailableError before any node starts.
 */
export function deviceSizedBlocks(model: ModelFile, nodeArgs: readonly string[]): DeviceFit | null {
  const backend = optionValue(nodeArgs, '--backend') ?? 'auto'
  const kv = optionValue(nodeArgs, '--kv-dtype') ?? 'f16'
  const kvDType: KvDType = (KV_DTYPES as readonly string[]).includes(kv) ? (kv as KvDType) : 'f16'
  if (isGgmlBackend(backend) && backend !== 'ggml-cpu')
    return blocksForDevice(model, backend, Number(optionValue(nodeArgs, '--device') ?? 0), kvDType)
  if (backend !== 'auto' || model.format !== 'gguf') return null
  const gpu = firstAutoGpu()
  if (!gpu) return null
  try {
    return blocksForDevice(model, gpu.backend, gpu.index, kvDType)
  } catch (e) {
    // auto: a GPU too small for one block leaves the span to the CPU kernels (node start says so)
    if (e instanceof BackendUnavailableError) return null
    throw e
  }
}

/** deviceSizedBlocks of the model file at `path` (opened for its header and tensor table, then closed). */
export function deviceSizedBlocksOfFile(path: string, nodeArgs: readonly string[]): DeviceFit | null {
  const model = openModelFile(path)
  try {
    return deviceSizedBlocks(model, nodeArgs)
  } finally {
    model.close()
  }
}

export function registerBackend(program: Command): void {
  const backend = program
    .command('backend')
    .description('Install and list the ggml backends a node can serve its span on (issue 32).')
  backend
    .command('install')
    .description(
      `Install a ggml backend package (node-llama-cpp ${GGML_PACKAGE_VERSION}'s prebuilt ggml for this platform) into $LAYERSWARM_HOME/backends; then \`node start --backend ggml-<flavour>\`.`
    )
    .addArgument(new Argument('<flavour>', 'which backend').choices([...BACKEND_FLAVOURS]))
    .action((flavour: BackendFlavour) => {
      const pkg = installBackend(flavour)
      process.stdout.write(`${JSON.stringify({ installed: pkg, version: GGML_PACKAGE_VERSION, dir: backendsDir() })}\n`)
      for (const line of ggmlDeviceLines()) process.stdout.write(`${line}\n`)
    })
  backend
    .command('list')
    .description('The ggml devices found, from the installed backend packages.')
    .action(() => {
      for (const line of ggmlDeviceLines()) process.stdout.write(`${line}\n`)
    })
}
