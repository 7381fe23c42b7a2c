/**
 * The calibrated kernel choice on this machine (issue 40): each weight dtype and shape class
 * timed on the native addon and on WebAssembly (shards/kernels/kernel-calibration.ts), which engine
 * `auto` takes, and how much slower the taken one measured than the faster (`worstRatio`: at
 * most 1.1 by construction, the bar). Fresh measurements, not the cached choice.
 *
 *   npm run bench -- kernels --choice [--threads n]
 *   LAYERSWARM_NATIVE_ISA=avx2 npm run bench -- kernels --choice     # a forced level's addon
 */
import { availableParallelism } from 'node:os'
import { calibrateKernels, cpuInfo } from '../shards/kernels/kernel-calibration.js'
import { createFastKernels } from '../shards/kernels/kernels-fast.js'
import { loadNativeAddon } from '../shards/native/load.js'

export async function runKernelChoiceBench(threads = availableParallelism()): Promise<Record<string, unknown>> {
  const addon = loadNativeAddon()
  const k = createFastKernels({ threads })
  try {
    await k.ready()
    if (!k.hasNative) return { bench: 'kernels-choice', cpu: cpuInfo(), native: null, note: 'no native addon: nothing to choose' }
    const classes = calibrateKernels(k)
    const ratio = (c: (typeof classes)[number]): number =>
      (c.engine === 'native' ? c.nativeMs : c.wasmMs) / Math.min(c.nativeMs, c.wasmMs)
    return {
      bench: 'kernels-choice',
      cpu: cpuInfo(),
      addonIsa: addon?.isa,
      threads,
      worstRatio: Math.round(Math.max(...classes.map(ratio)) * 1000) / 1000,
      classes: classes.map((c) => ({
        ...c,
        nativeMs: Math.round(c.nativeMs * 1000) / 1000,
        wasmMs: Math.round(c.wasmMs * 1000) / 1000
      }))
    }
  } finally {
    k.close?.()
  }
}
