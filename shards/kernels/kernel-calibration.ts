import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { cpus, homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { NATIVE_BATCHED_FROM } from '../options.js'
import { quantizeMatrix } from '../quant/index.js'
import { QUANT_LAYOUTS, type QuantDType } from '../quant/quant-blocks.js'
import type { WeightDType, WeightMatrix } from '../types.js'
import { routeKey, type ShapeClass } from './wasm/matmul-dispatch.js'
import type { FastKernels } from './wasm/wasm-kernels.js'

/*
 * Kernels chosen by measurement, not by build flags (issue 40). With the native addon loaded,
 * each weight dtype and shape class (decode: T below the batched threshold; batched) runs on
 * the addon or on WebAssembly, whichever this machine measured faster: a short calibration
 * (well under a second) times both on one matrix per class and caches the choice per machine
 * in $LAYERSWARM_HOME (else ~/.layerswarm)/kernel-choice.json, keyed by CPU model, CPU flags,
 * the addon file and Node's version. Both engines give the same bits, so the choice changes
 * speed only. The TypeScript reference is slower than both on every shape the calibration
 * measures; `auto` keeps it for tiny models only (kernel-policy.ts SMALL_MODEL_DIM).
 * LAYERSWARM_CALIBRATE=0 skips it (every class on the addon where it has kernels, as before).
 */

/** The CPU as the OS describes it: model name and the SIMD flags the kernels care about. */
export interface CpuInfo {
  readonly model: string
  readonly arch: string
  readonly flags: readonly string[]
}

/** Flags worth printing (x86 /proc/cpuinfo `flags`, Arm `Features`); the rest is noise here. */
const SIMD_FLAGS = new Set([
  'sse4_2',
  'avx',
  'avx2',
  'fma',
  'f16c',
  'avx_vnni',
  'avx512f',
  'avx512bw',
  'avx512vl',
  'avx512_vnni',
  'avx512_bf16',
  'amx_int8',
  'amx_bf16',
  'asimd',
  'asimddp',
  'asimdhp',
  'i8mm',
  'sve',
  'sve2',
  'bf16'
])

export function cpuInfo(): CpuInfo {
  const model = cpus()[0]?.model?.trim() || 'unknown'
  let flags: string[] = []
  try {
    const text = readFileSync('/proc/cpuinfo', 'utf8')
    const line = /^(?:flags|Features)\s*:(.*)$/m.exec(text)?.[1] ?? ''
    flags = [...new Set(line.trim().split(/\s+/))].filter((f) => SIMD_FLAGS.has(f)).sort()
  } catch {
    // not Linux: the model name only
  }
  return { model, arch: process.arch, flags }
}

export interface KernelClassChoice {
  readonly dtype: WeightDType
  readonly shape: ShapeClass
  /** Best of the timed calls, milliseconds, per engine. */
  readonly nativeMs: number
  readonly wasmMs: number
  readonly engine: 'native' | 'wasm'
}

export interface KernelChoice {
  readonly key: string
  readonly cpu: CpuInfo
  readonly addonIsa: string
  readonly measuredAt: string
  readonly classes: readonly KernelClassChoice[]
}

/** Where the choice is cached: $LAYERSWARM_HOME/kernel-choice.json, else ~/.layerswarm/. */
export function kernelChoiceFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.LAYERSWARM_HOME || join(homedir(), '.layerswarm'), 'kernel-choice.json')
}

function calibrationKey(cpu: CpuInfo, addonPath: string, threads: number): string {
  let build = addonPath
  try {
    const st = statSync(addonPath)
    build += `:${st.size}:${Math.floor(st.mtimeMs)}`
  } catch {}
  return JSON.stringify([cpu.model, cpu.arch, cpu.flags.join(' '), build, process.version, threads])
}

/**
 * WebAssembly takes a class only when measured at least 10 % faster: within that, timing noise
 * (a shared host) would flip the choice from one machine's run to the next, and the issue's
 * bar is no `auto` choice more than 10 % slower than the best.
 */
const WASM_MARGIN = 0.9

const CALIBRATED: readonly WeightDType[] = ['f32', 'f16', 'q8_0', ...(Object.keys(QUANT_LAYOUTS) as QuantDType[])]
const ROWS = 512
const COLS = 1024

/** A matrix of `dtype` for timing only: the kernels' speed does not depend on the values. */
function timingMatrix(dtype: WeightDType): WeightMatrix {
  if (dtype === 'f32' || dtype === 'f16' || dtype === 'q8_0') {
    const v = new Float32Array(ROWS * COLS).map((_, i) => Math.sin(i) * 0.1)
    return quantizeMatrix(v, ROWS, COLS, dtype)
  }
  const { blockBytes, blockElems } = QUANT_LAYOUTS[dtype as QuantDType]
  // 0x11 everywhere: normal f16/bf16 scales, small quants (no subnormal float slow paths).
  return { dtype, rows: ROWS, cols: COLS, data: new Uint8Array((COLS / blockElems) * blockBytes * ROWS).fill(0x11) }
}

function bestMs(k: FastKernels, w: WeightMatrix, x: Float32Array, out: Float32Array, T: number, reps: number): number {
  let best = Number.POSITIVE_INFINITY
  for (let i = 0; i < reps; i++) {
    const t0 = process.hrtime.bigint()
    k.matmul(out, x, w, T)
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6)
  }
  return best
}

/** Time every class on both engines (best of a few calls each, interleaved) and pick the faster. */
export function calibrateKernels(k: FastKernels, reps = 4): KernelClassChoice[] {
  const classes: KernelClassChoice[] = []
  try {
    for (const dtype of CALIBRATED) {
      const w = k.prepare(timingMatrix(dtype))
      for (const [shape, T] of [
        ['decode', 1],
        ['batched', 2 * NATIVE_BATCHED_FROM]
      ] as Array<[ShapeClass, number]>) {
        const x = new Float32Array(T * COLS).map((_, i) => Math.cos(i))
        const out = new Float32Array(T * ROWS)
        const ms = { native: Number.POSITIVE_INFINITY, wasm: Number.POSITIVE_INFINITY }
        for (let round = 0; round < 2; round++) {
          for (const engine of ['native', 'wasm'] as const) {
            k.setNativeRoutes({ force: engine })
            k.matmul(out, x, w, T) // warm-up
            ms[engine] = Math.min(ms[engine], bestMs(k, w, x, out, T, reps))
          }
        }
        classes.push({
          dtype,
          shape,
          nativeMs: ms.native,
          wasmMs: ms.wasm,
          engine: ms.wasm < ms.native * WASM_MARGIN ? 'wasm' : 'native'
        })
      }
    }
  } finally {
    k.setNativeRoutes({ force: null })
  }
  return classes
}

const chosen = new WeakMap<FastKernels, KernelChoice>()

/** The choice applied to `k` by chooseKernels, if any. */
export function kernelChoiceOf(k: unknown): KernelChoice | undefined {
  return typeof k === 'object' && k !== null ? chosen.get(k as FastKernels) : undefined
}

function readCache(file: string): Record<string, KernelChoice> {
  try {
    if (!existsSync(file)) return {}
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as unknown
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, KernelChoice>) : {}
  } catch {
    return {} // unreadable or corrupt: measure again and rewrite it
  }
}

/**
 * Apply the cached choice for this machine and build to `k`, measuring it first when there is
 * none (then caching it; a cache that cannot be written only costs a calibration next time).
 * Undefined, and `k` untouched, without the addon or with LAYERSWARM_CALIBRATE=0.
 */
export function chooseKernels(
  k: FastKernels,
  addon: { path: string; isa: string } | null,
  options: { file?: string; env?: NodeJS.ProcessEnv } = {}
): KernelChoice | undefined {
  const env = options.env ?? process.env
  if (!addon || !k.hasNative || env.LAYERSWARM_CALIBRATE === '0') return undefined
  const file = options.file ?? kernelChoiceFile(env)
  const cpu = cpuInfo()
  const key = calibrationKey(cpu, addon.path, k.threads)
  const cache = readCache(file)
  let choice = cache[key]
  if (!choice || !Array.isArray(choice.classes)) {
    choice = { key, cpu, addonIsa: addon.isa, measuredAt: new Date().toISOString(), classes: calibrateKernels(k) }
    try {
      mkdirSync(dirname(file), { recursive: true })
      const tmp = `${file}.${process.pid}.tmp`
      writeFileSync(tmp, `${JSON.stringify({ ...cache, [key]: choice }, null, 2)}\n`)
      renameSync(tmp, file)
    } catch {
      // read-only home: keep the measured choice for this process only
    }
  }
  k.setNativeRoutes({ avoid: new Set(choice.classes.filter((c) => c.engine === 'wasm').map((c) => routeKey(c.dtype, c.shape))) })
  chosen.set(k, choice)
  return choice
}

/** One line's worth: the ISA, and which classes run where (for `node start`'s JSON and doctor). */
export function kernelChoiceSummary(choice: KernelChoice): { isa: string; native: string[]; wasm: string[] } {
  const names = (engine: 'native' | 'wasm'): string[] =>
    choice.classes.filter((c) => c.engine === engine).map((c) => routeKey(c.dtype, c.shape))
  return { isa: choice.addonIsa, native: names('native'), wasm: names('wasm') }
}
