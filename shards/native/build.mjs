// Builds the native kernel addon with g++ directly (no node-gyp, no downloads): Node-API
// headers come from the node-api-headers and node-addon-api packages, and Node-API symbols
// resolve against the running node at load time. Built on the machine that runs it, so
// -march=native is safe; addon.cc's selfTest refuses a CPU lacking those features.
// Never fails the install: on any error it prints one line and exits 0, and the kernels
// fall back to WebAssembly.
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const out = join(here, 'build', 'layerswarm_kernels.node')
const require = createRequire(import.meta.url)
try {
  if (process.env.LAYERSWARM_NATIVE === '0') throw new Error('disabled by LAYERSWARM_NATIVE=0')
  const headers = dirname(require.resolve('node-api-headers/include/node_api.h'))
  const addonApi = dirname(require.resolve('node-addon-api/napi.h'))
  const cxx = process.env.CXX || 'g++'
  const march = process.env.LAYERSWARM_MARCH || 'native'
  mkdirSync(dirname(out), { recursive: true })
  // One definition of the batched-kernel threshold for TypeScript and C++ (batch.h).
  const options = readFileSync(join(here, '..', 'options.ts'), 'utf8')
  const batchedFrom = /export const NATIVE_BATCHED_FROM = (\d+)/.exec(options)?.[1]
  if (!batchedFrom) throw new Error('NATIVE_BATCHED_FROM not found in shards/options.ts')
  const args = [
    `-DLS_BATCHED_FROM=${batchedFrom}`,
    '-O3',
    `-march=${march}`,
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
    join(here, 'decode.cc'),
    join(here, 'block.cc'),
    join(here, 'ops.cc'),
    join(here, 'attention.cc'),
    join(here, 'quant-dot.cc'),
    join(here, 'quant-batch.cc'),
    join(here, 'quant-decode.cc'),
    join(here, 'quant-layout.cc'),
    join(here, 'quant-q8k.cc'),
    '-o',
    out
  ]
  if (process.platform === 'darwin') args.push('-undefined', 'dynamic_lookup')
  execFileSync(cxx, args, { stdio: ['ignore', 'ignore', 'pipe'] })
  console.log(`build:native: built ${out}`)
} catch (e) {
  rmSync(out, { force: true })
  const reason = String(
    e?.stderr
      ?.toString()
      .split('\n')
      .find((l) => l.includes('error')) ??
      e?.message ??
      e
  ).slice(0, 200)
  console.log(`build:native: skipped (WebAssembly kernels will be used): ${reason}`)
}
process.exit(0)
