// Kernels: the reference set, the fast set (WebAssembly, native), calibration and policy.

export {
  type CpuInfo,
  chooseKernels,
  cpuInfo,
  type KernelChoice,
  kernelChoiceFile,
  kernelChoiceOf,
  kernelChoiceSummary
} from './kernel-calibration.js'
export { SMALL_MODEL_DIM, selectKernelsFor } from './kernel-policy.js'
export { type SpanKernelReport, spanKernelReport, spanSlowReasons } from './kernel-report.js'
export type { AttentionShape, KernelPlacement, Kernels, KvLayer, PrepareOptions } from './kernels.js'
export {
  createFastKernels,
  type FastKernelOptions,
  type FastKernels,
  type KernelKind,
  type SelectKernelsOptions,
  selectKernels
} from './kernels-fast.js'
export { createReferenceKernels } from './kernels-ref.js'
