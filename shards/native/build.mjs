// Builds the native kernel addon with g++ directly (no node-gyp, no downloads): Node-API
// headers come from the node-api-headers and node-addon-api packages, and Node-API symbols
// resolve against the running node at load time. Built on the machine that runs it, so
// -march=native is safe; addon.cc's selfTest refuses a CPU lacking those features.
// Never fails the install: on any error it prints one line and exits 0, and the kernels
// fall back to WebAssembly.
// Forced instruction-set levels (issue 40): LAYERSWARM_NATIVE_ISA=generic|avx2|avx512 builds the
// main addon for that level instead of -march=native; LAYERSWARM_NATIVE_ISAS=generic,avx2,avx512
// (or "all"; CI=1 implies all on x86-64) also builds one addon per level as
// build/layerswarm_kernels-<isa>.node, so a machine with AVX-512 still runs the AVX2 and generic
// code (the compliance suite takes each one that loads here; LAYERSWARM_NATIVE_ISA at run time
// picks one, see load.ts).
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const out = join(here, 'build', 'layerswarm_kernels.node')
const require = createRequire(import.meta.url)
// -march per forced level: x86-64 baseline (SSE2), x86-64-v3 (AVX2, FMA, F16C, no AVX-512 or
// AVX-VNNI), x86-64-v4 (AVX-512 F/BW/DQ/VL) plus VNNI, the set the AVX-512 paths take.
const ISA_FLAGS = {
  generic: ['-march=x86-64', '-mtune=generic'],
  avx2: ['-march=x86-64-v3', '-mtune=generic'],
  avx512: ['-march=x86-64-v4', '-mavx512vnni', '-mtune=generic']
}
function isaFlags(isa) {
  const flags = ISA_FLAGS[isa]
  if (!flags) throw new Error(`unknown LAYERSWARM_NATIVE_ISA ${isa} (generic, avx2 or avx512)`)
  return flags
}
/** Levels to build beside the main addon: none unless asked (or CI on x86-64). */
function extraIsas() {
  const asked = process.env.LAYERSWARM_NATIVE_ISAS ?? (process.env.CI && process.arch === 'x64' ? 'all' : '')
  if (!asked || process.arch !== 'x64') return []
  return asked === 'all' ? Object.keys(ISA_FLAGS) : asked.split(',').filter((s) => s.length > 0)
}
try {
  if (process.env.LAYERSWARM_NATIVE === '0') throw new Error('disabled by LAYERSWARM_NATIVE=0')
  const headers = dirname(require.resolve('node-api-headers/include/node_api.h'))
  const addonApi = dirname(require.resolve('node-addon-api/napi.h'))
  const cxx = process.env.CXX || 'g++'
  const march = process.env.LAYERSWARM_MARCH || 'native'
  const forced = process.env.LAYERSWARM_NATIVE_ISA
  mkdirSync(dirname(out), { recursive: true })
  // One definition of the batched-kernel threshold for TypeScript and C++ (batch.h).
  const options = readFileSync(join(here, '..', 'options.ts'), 'utf8')
  const batchedFrom = /export const NATIVE_BATCHED_FROM = (\d+)/.exec(options)?.[1]
  if (!batchedFrom) throw new Error('NATIVE_BATCHED_FROM not found in shards/options.ts')
  const args = (target, cpu) => [
    `-DLS_BATCHED_FROM=${batchedFrom}`,
    '-O3',
    ...cpu,
    '-ffp-contract=off',
    '-fno-fast-math',
    '-std=c++17',
    '-shared',
    '-fPIC',
    '-fvisibility=hidden',
    '-DNAPI_VERSION=8',
    '-DNAPI_DISABLE_CPP_EXCEPTIONS',
    '-DNODE_ADDON_API_DISABLE_CPP_EXCEPTIONS',
    '-I',
    headers,
    '-I',
    addonApi,
    join(here, 'addon.cc'),
    join(here, 'matmul.cc'),
    join(here, 'matmul-q8-avx2.cc'),
    join(here, 'neon-q8.cc'),
    join(here, 'decode.cc'),
    join(here, 'block.cc'),
    join(here, 'ops.cc'),
    join(here, 'attention.cc'),
    join(here, 'quant-dot.cc'),
    join(here, 'quant-batch.cc'),
    join(here, 'quant-batch-avx2.cc'),
    join(here, 'quant-decode.cc'),
    join(here, 'quant-layout.cc'),
    join(here, 'quant-q8k.cc'),
    '-o',
    target,
    ...(process.platform === 'darwin' ? ['-undefined', 'dynamic_lookup'] : [])
  ]
  execFileSync(cxx, args(out, forced ? isaFlags(forced) : [`-march=${march}`]), { stdio: ['ignore', 'ignore', 'pipe'] })
  console.log(`build:native: built ${out}${forced ? ` (forced ${forced})` : ''}`)
  // A level that fails to build leaves the main addon alone (its file is removed: no stale copy).
  for (const isa of extraIsas()) {
    const target = join(here, 'build', `layerswarm_kernels-${isa}.node`)
    try {
      execFileSync(cxx, args(target, isaFlags(isa)), { stdio: ['ignore', 'ignore', 'pipe'] })
      console.log(`build:native: built ${target}`)
    } catch (e) {
      rmSync(target, { force: true })
      console.log(`build:native: ${isa} build skipped: ${firstError(e)}`)
    }
  }
} catch (e) {
  rmSync(out, { force: true })
  console.log(`build:native: skipped (WebAssembly kernels will be used): ${firstError(e)}`)
}
function firstError(e) {
  return String(
    e?.stderr
      ?.toString()
      .split('\n')
      .find((l) => l.includes('error')) ??
      e?.message ??
      e
  ).slice(0, 200)
}
process.exit(0)
