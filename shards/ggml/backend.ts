import { BackendUnavailableError } from '../errors.js'
import { selectKernelsFor } from '../kernels/kernel-policy.js'
import type { Kernels } from '../kernels/kernels.js'
import type { KernelKind } from '../kernels/kernels-fast.js'
import type { KvDType } from '../kv-cache.js'
import type { ModelFile } from '../model/model-file.js'
import type { ShardLike } from '../shard.js'
import { createShard } from '../shard.js'
import { AUTO_GPU, blockWeightBytes } from './device-fit.js'
import { GgmlShard } from './ggml-shard.js'
import { findGgmlLibraries, flavourOf, GGML_BACKENDS, type GgmlBackend } from './package.js'
import { devicesOf, type GgmlDevice, isSoftwareDevice, loadGgml } from './runtime.js'

/** `--backend` values (issue 32): the engine's kernels (native, wasm) or a ggml device. */
export const BACKENDS = ['auto', 'native', 'wasm', ...GGML_BACKENDS] as const
export type BackendChoice = (typeof BACKENDS)[number]

export function isGgmlBackend(b: string): b is GgmlBackend {
  return (GGML_BACKENDS as readonly string[]).includes(b)
}

export interface SpanBackendInit {
  readonly model: ModelFile
  readonly start: number
  readonly end: number
  readonly backend: BackendChoice
  /** Index among the chosen ggml backend's devices (`--device`). */
  readonly device?: number
  /** The engine's kernel set when the span runs on it (`--kernels`; `--backend native|wasm` override it). */
  readonly kernelKind?: KernelKind
  readonly threads?: number
  readonly kvDType?: KvDType
  readonly onProgress?: (loaded: number, total: number) => void
}

/** The runner a span got, what it runs on, and (auto) why it did not take a GPU. */
export interface SpanBackend {
  readonly shard: ShardLike
  /** The engine's kernel set, when the span runs on it (the caller closes it). */
  readonly kernels?: Kernels
  /** What the node announces: native, wasm, reference, or ggml-cpu / ggml-cuda / … */
  readonly backend: string
  readonly device?: GgmlDevice
  /** A GPU backend's warm-up at load (GgmlShard.warmUp): minutes on a cold pipeline cache. */
  readonly warmUpMs?: number
  /** `auto` without a usable GPU: one line saying why the CPU kernels serve. */
  readonly fallback?: string
}

/**
 * The span on the backend asked for. A ggml backend that cannot run is a
 * BackendUnavailableError naming what to install; `auto` takes an installed GPU backend's first
 * GPU whose free memory holds the span's weights (with a quarter to spare for KV and
 * activations), else the engine's CPU kernels with a `fallback` line.
 */
export function createSpanBackend(init: SpanBackendInit): SpanBackend {
  const { backend } = init
  if (isGgmlBackend(backend)) return ggmlSpan(init, backend, init.device ?? 0)
  if (backend === 'auto') {
    const gpu = autoGpu(init)
    if ('device' in gpu) return ggmlSpan(init, gpu.backend, gpu.device)
    return { ...engineSpan(init, init.kernelKind ?? 'auto'), fallback: gpu.why }
  }
  return engineSpan(init, backend)
}

function ggmlSpan(init: SpanBackendInit, backend: GgmlBackend, device: number): SpanBackend {
  const shard = new GgmlShard({
    model: init.model,
    start: init.start,
    end: init.end,
    backend,
    device,
    kvDType: init.kvDType,
    threads: init.threads,
    onProgress: init.onProgress
  })
  // GPU pipelines compile on first use; a node pays for that before it serves (ggml-shard.ts).
  // A hardware GPU's driver compiles in milliseconds: warm every prompt size class too (2-8
  // rows each have a pipeline in ggml-vulkan; 33 and 65 rows: medium and large tiles). On a
  // software device (lavapipe) each of those is minutes: the 9-row prefill and decode only.
  const extra = isSoftwareDevice(shard.device) ? [] : [2, 3, 4, 5, 6, 7, 8, 33, 65]
  const warmUpMs = backend === 'ggml-cpu' ? undefined : Math.round(shard.warmUp(extra))
  return { shard, backend, device: shard.device, warmUpMs }
}

function engineSpan(init: SpanBackendInit, kind: KernelKind): SpanBackend {
  const kernels = selectKernelsFor(init.model.config, { kind, threads: init.threads })
  const shard = createShard({ ...init, kernels, kvDType: init.kvDType, onProgress: init.onProgress })
  return { shard, kernels, backend: kernels.name }
}

function autoGpu(init: SpanBackendInit): { backend: GgmlBackend; device: number } | { why: string } {
  const installed = AUTO_GPU.filter((b) => findGgmlLibraries(flavourOf(b)) !== null)
  if (installed.length === 0) return { why: 'no GPU backend installed (`layerswarm backend install cuda|vulkan|metal`)' }
  if (init.model.format !== 'gguf') return { why: `the ggml backends read GGUF files; ${init.model.path} is not one` }
  const need = spanWeightBytes(init) * 1.25
  const seen: string[] = []
  for (const backend of installed) {
    let runtime: ReturnType<typeof loadGgml>
    try {
      runtime = loadGgml(flavourOf(backend))
    } catch (e) {
      if (!(e instanceof BackendUnavailableError)) throw e
      seen.push(`${backend}: ${e.message}`)
      continue
    }
    const devices = devicesOf(runtime, backend)
    const fit = devices.findIndex((d) => (d.type === 'gpu' || d.type === 'igpu') && !isSoftwareDevice(d) && d.freeBytes >= need)
    if (fit >= 0) return { backend, device: fit }
    seen.push(`${backend}: ${devices.length === 0 ? 'no device' : `no GPU with ${Math.ceil(need / 2 ** 20)} MiB free`}`)
  }
  return { why: seen.join('; ') }
}

/** Bytes of the span's block weights as stored in the file. */
function spanWeightBytes(init: SpanBackendInit): number {
  let bytes = 0
  for (let l = init.start; l < init.end; l++) bytes += blockWeightBytes(init.model, l)
  return bytes
}
