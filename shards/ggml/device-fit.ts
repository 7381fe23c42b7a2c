import { BackendUnavailableError } from '../errors.js'
import { type KvDType, kvRowBytes } from '../kv-cache.js'
import type { ModelFile } from '../model/model-file.js'
import { rowBytes } from '../quant/codecs.js'
import { findGgmlLibraries, flavourOf, type GgmlBackend } from './package.js'
import { devicesOf, type GgmlDevice, isSoftwareDevice, loadGgml, pickDevice } from './runtime.js'

/** GPU flavours `auto` tries, in order, where their package is installed. */
export const AUTO_GPU: readonly GgmlBackend[] = ['ggml-cuda', 'ggml-metal', 'ggml-vulkan']

/**
 * The share of a device's free memory a span may plan on: ggml's compute buffers (one step's
 * activations), the driver and whatever else runs on the GPU need the rest.
 */
export const DEVICE_MEMORY_SHARE = 0.8

const MATRICES = ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'] as const

/** Bytes of block `l`'s matrices as stored in the file (norms and biases are a rounding error). */
export function blockWeightBytes(model: ModelFile, l: number): number {
  const info = model.matrixInfo?.bind(model)
  if (!info) return 0
  let bytes = 0
  for (const t of MATRICES) {
    const m = info(`blk.${l}.${t}`)
    bytes += rowBytes(m.dtype, m.cols) * m.rows
  }
  return bytes
}

/** What `blocksForDevice` found. */
export interface DeviceFit {
  readonly backend: GgmlBackend
  readonly device: GgmlDevice
  /** Blocks whose weights and whole-context KV caches fit DEVICE_MEMORY_SHARE of its free memory. */
  readonly blocks: number
  /** One block's weights (the largest block's) plus its KV cache over the model's context. */
  readonly blockBytes: number
}

const mib = (bytes: number): number => Math.round(bytes / 2 ** 20)

/**
 * How many of `model`'s blocks fit device `index` of a ggml backend (issue 32: `join` sizes its
 * span by the device's free memory, as ggml_backend_dev_memory reports it, rather than by host
 * RAM). Per block: the largest block's weights plus one session's KV cache over the whole
 * context in `kvDType`. BackendUnavailableError when the backend or device is missing, or when
 * not even one block fits.
 */
export function blocksForDevice(model: ModelFile, backend: GgmlBackend, index = 0, kvDType: KvDType = 'f16'): DeviceFit {
  const device = pickDevice(loadGgml(flavourOf(backend)), backend, index)
  const c = model.config
  let largest = 0
  for (let l = 0; l < c.nLayers; l++) largest = Math.max(largest, blockWeightBytes(model, l))
  const blockBytes = largest + 2 * c.seqLen * kvRowBytes(kvDType, c.kvDim)
  const blocks = Math.min(c.nLayers, Math.floor((device.freeBytes * DEVICE_MEMORY_SHARE) / blockBytes))
  if (blocks < 1)
    throw new BackendUnavailableError(
      `${backend} device ${index} (${device.description}) has ${mib(device.freeBytes)} MiB free; one block of ${model.path} needs ${mib(blockBytes)} MiB`
    )
  return { backend, device, blocks, blockBytes }
}

/**
 * The GPU `--backend auto` would look at first: the first hardware GPU (not a software
 * renderer such as lavapipe) of an installed GPU backend whose devices ggml can list; null when
 * there is none. Loads that backend's package (one per process).
 */
export function firstAutoGpu(env: NodeJS.ProcessEnv = process.env): { backend: GgmlBackend; index: number } | null {
  for (const backend of AUTO_GPU) {
    if (!findGgmlLibraries(flavourOf(backend), env)) continue
    let devices: GgmlDevice[]
    try {
      devices = devicesOf(loadGgml(flavourOf(backend), env), backend)
    } catch (e) {
      if (e instanceof BackendUnavailableError) continue
      throw e
    }
    const index = devices.findIndex((d) => (d.type === 'gpu' || d.type === 'igpu') && !isSoftwareDevice(d))
    if (index >= 0) return { backend, index }
  }
  return null
}
