import { type BackendChoice, createSpanBackend } from '../../../../shards/ggml/index.js'
import {
  type KernelKind,
  type Kernels,
  type KvDType,
  kernelChoiceOf,
  kernelChoiceSummary,
  kvRowBytes,
  type ModelFile,
  type ShardLike,
  type SpanKernelReport,
  spanKernelReport
} from '../../../../shards/index.js'
import type { NodeHardware } from '../../../daemon/swarm-node-init.js'
import { progress } from '../../../log.js'

/** The `node start` options that choose what runs the span (issue 32). */
export interface BackendOptions {
  readonly backend: BackendChoice
  readonly device?: number
  readonly kernels: KernelKind
  readonly threads?: number
  readonly kvDtype: KvDType
}

/**
 * Load the span on the backend asked for (`--backend`, `--device`, `--kernels`), logging one
 * line on what runs it (and, for `auto` without a usable GPU, one line on why the CPU kernels
 * do). A ggml backend that cannot run throws BackendUnavailableError: the CLI's one coded line.
 */
export function loadSpanBackend(
  model: ModelFile,
  [start, end]: [number, number],
  opts: BackendOptions,
  log: (event: Record<string, unknown>) => void
): { shard: ShardLike; kernels?: Kernels; report: SpanKernelReport; hardware: NodeHardware } {
  log({ event: 'loading', model: model.path, layers: [start, end], backend: opts.backend })
  const bar = progress('loading blocks', end - start, { unit: 'blocks' })
  const span = createSpanBackend({
    model,
    start,
    end,
    backend: opts.backend,
    device: opts.device,
    kernelKind: opts.kernels,
    threads: opts.threads,
    kvDType: opts.kvDtype,
    onProgress: (done) => bar.update(done)
  })
  bar.done()
  if (span.fallback) log({ event: 'backend-fallback', backend: span.backend, reason: span.fallback })
  const hardware: NodeHardware = {
    backend: span.backend,
    ...(span.device
      ? { device: `${span.device.backend}:${span.device.description}`, deviceMemoryBytes: span.device.totalBytes }
      : {})
  }
  if (span.kernels) {
    // One line on the kernels the span runs on; a span (partly) on the slow TypeScript kernels says why.
    const report = spanKernelReport(span.kernels, span.shard)
    log({ event: report.slowWeightBytes || report.slowAttention || report.slowKv ? 'kernels-slow' : 'kernels', ...report })
    return { shard: span.shard, kernels: span.kernels, report, hardware }
  }
  const c = model.config
  const report: SpanKernelReport = {
    kernels: span.backend,
    weightBytes: span.shard.weightBytes,
    kvBytes: (end - start) * 2 * c.seqLen * kvRowBytes(span.shard.kvDType, c.kvDim),
    kvMemory: 'device'
  }
  log({ event: 'backend', ...hardware, weightBytes: report.weightBytes, warmUpMs: span.warmUpMs })
  return { shard: span.shard, report, hardware }
}

/** Free what loadSpanBackend made: the engine's kernel set, or the ggml span's device memory. */
export function closeSpan(shard: ShardLike, kernels: Kernels | undefined): void {
  shard.close()
  kernels?.close?.()
}

/** Issue 40 (moved from node-start.ts to keep it under 320 lines): where each dtype and shape class runs (calibrated: shards/kernels/kernel-calibration.ts), when measured. */
export function kernelChoiceField(kernels: unknown): { kernelChoice?: ReturnType<typeof kernelChoiceSummary> } {
  const choice = kernelChoiceOf(kernels)
  return choice ? { kernelChoice: kernelChoiceSummary(choice) } : {}
}
