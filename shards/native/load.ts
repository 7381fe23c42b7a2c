import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The loaded native kernel addon (shards/native/kernels.cc). */
export interface NativeAddon {
  readonly path: string
  /**
   * Run share `tid` of `n` of the op in the argument block (same protocol as the wasm task).
   * `base` is a view at offset 0 of the shared WebAssembly memory: passed per call, since the
   * addon's statics are shared by every thread and kernel set of the process.
   */
  task(base: Uint8Array, tid: number, n: number): void
  /** Instruction set the addon was compiled for, e.g. "avx512vnni". */
  readonly isa: string
  /** Whether it has T < 8 (decode) kernels for Q8_0 and for f32 weights (decode.cc). */
  readonly decodeQ8: boolean
  readonly decodeF32: boolean
  /** Whether it multiplies the block types of shards/quant/quant-blocks.ts (quant-dot.cc, op 8). */
  readonly quantTypes: boolean
  /** Whether it runs a whole decode block in one call (block.cc, OP_DECODE_BLOCK). */
  readonly fusedBlock: boolean
  /** The batched-kernel threshold compiled in (shards/options.ts NATIVE_BATCHED_FROM at build time). */
  readonly batchedFrom?: number
  /** Its port of V8's Math.exp (tests compare the two). */
  readonly jsExp?: (x: number) => number
  /**
   * Advise the OS to back bytes [offset, offset + bytes) of the memory `base` views (from its
   * start) with huge pages; false where that does not apply (no-op). Older builds lack it.
   */
  readonly adviseHugePages?: (base: Uint8Array, offset: number, bytes: number) => boolean
  /**
   * A zeroed native buffer of `bytes` (anonymous mmap) for weights past the 4 GiB WebAssembly
   * heap, and the address of a view's first byte: the native kernels take weights there
   * through their distance from the heap's start. Older builds lack them.
   */
  readonly allocBuffer?: (bytes: number) => ArrayBuffer
  readonly addressOf?: (view: Uint8Array) => number
  /**
   * Rearrange the Q4_K/Q5_K/Q6_K matrix a view holds (ggml type id, rows, cols) in place into
   * the rows8 layout its decode kernels stream best (quant-layout.h); false (untouched) for
   * other types. Older builds lack it.
   */
  readonly repackRows8?: (view: Uint8Array, type: number, rows: number, cols: number) => boolean
}

/** The forced instruction-set levels build.mjs can build beside the main addon (issue 40). */
export const NATIVE_ISAS = ['generic', 'avx2', 'avx512'] as const
export type NativeIsa = (typeof NATIVE_ISAS)[number]

/**
 * Where `npm run build:native` leaves the addon, found from this file in src or dist: the one
 * built for `isa` (build/layerswarm_kernels-<isa>.node) when asked, by argument or by
 * LAYERSWARM_NATIVE_ISA at run time, else the main one.
 */
export function nativeAddonPath(isa: string | undefined = process.env.LAYERSWARM_NATIVE_ISA || undefined): string | null {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 6; i++) {
    const pkg = join(dir, 'package.json')
    if (existsSync(pkg)) {
      try {
        if (JSON.parse(readFileSync(pkg, 'utf8')).name === 'layerswarm')
          return join(dir, 'shards', 'native', 'build', isa ? `layerswarm_kernels-${isa}.node` : 'layerswarm_kernels.node')
      } catch {
        // not our package.json; keep walking up
      }
    }
    dir = dirname(dir)
  }
  return null
}

/** The forced-level addons built here (build.mjs LAYERSWARM_NATIVE_ISAS, CI), each with its path. */
export function nativeIsaAddonPaths(): Array<{ isa: NativeIsa; path: string }> {
  const found: Array<{ isa: NativeIsa; path: string }> = []
  for (const isa of NATIVE_ISAS) {
    const path = nativeAddonPath(isa)
    if (path && existsSync(path)) found.push({ isa, path })
  }
  return found
}

/**
 * Load the addon, or null when it is missing, built for another CPU or Node ABI, or disabled
 * with LAYERSWARM_NATIVE=0. Never throws: the WebAssembly kernels are the fallback.
 */
export function loadNativeAddon(path: string | null = nativeAddonPath()): NativeAddon | null {
  if (process.env.LAYERSWARM_NATIVE === '0' || !path || !existsSync(path)) return null
  try {
    const addon = createRequire(import.meta.url)(path) as Omit<NativeAddon, 'path'> & { selfTest(): boolean }
    if (typeof addon.task !== 'function' || !addon.selfTest()) return null
    return {
      path,
      task: addon.task,
      isa: addon.isa,
      decodeQ8: addon.decodeQ8 === true,
      decodeF32: addon.decodeF32 === true,
      quantTypes: addon.quantTypes === true,
      fusedBlock: addon.fusedBlock === true,
      batchedFrom: typeof addon.batchedFrom === 'number' ? addon.batchedFrom : undefined,
      jsExp: addon.jsExp,
      adviseHugePages: typeof addon.adviseHugePages === 'function' ? addon.adviseHugePages : undefined,
      allocBuffer: typeof addon.allocBuffer === 'function' ? addon.allocBuffer : undefined,
      addressOf: typeof addon.addressOf === 'function' ? addon.addressOf : undefined,
      // LAYERSWARM_REPACK=0 keeps GGUF's row layout (an A/B of the rows8 layout on one host).
      repackRows8:
        typeof addon.repackRows8 === 'function' && process.env.LAYERSWARM_REPACK !== '0' ? addon.repackRows8 : undefined
    }
  } catch {
    return null
  }
}
