// Builds the ggml span addon (issue 32) beside the kernel addon: build/layerswarm_ggml.node.
// Compiled against ggml's vendored public headers (include/, see its README) and linked against
// no ggml library: span-load.cc opens the prebuilt libraries of @node-llama-cpp/<platform>
// at run time (`layerswarm backend install cpu`), and -z lazy lets the ggml_* calls bind then.
// So it builds on every machine with g++ and never needs the package or llama.cpp's sources.
// Never fails the install: on any error it prints one line and exits 0 (the ggml backends
// then report BACKEND_UNAVAILABLE and the engine's own kernels serve).
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const out = join(here, '..', 'build', 'layerswarm_ggml.node')
const require = createRequire(import.meta.url)
try {
  if (process.env.LAYERSWARM_NATIVE === '0') throw new Error('disabled by LAYERSWARM_NATIVE=0')
  if (process.platform === 'win32') throw new Error('not built on Windows yet')
  const headers = dirname(require.resolve('node-api-headers/include/node_api.h'))
  const addonApi = dirname(require.resolve('node-addon-api/napi.h'))
  mkdirSync(dirname(out), { recursive: true })
  const args = [
    '-O2',
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
    join(here, 'span-addon.cc'),
    join(here, 'span-load.cc'),
    join(here, 'span.cc'),
    '-o',
    out,
    ...(process.platform === 'darwin' ? ['-undefined', 'dynamic_lookup'] : ['-Wl,-z,lazy', '-ldl'])
  ]
  execFileSync(process.env.CXX || 'g++', args, { stdio: ['ignore', 'ignore', 'pipe'] })
  console.log(`build:native: built ${out}`)
} catch (e) {
  rmSync(out, { force: true })
  const line =
    e?.stderr
      ?.toString()
      .split('\n')
      .find((l) => l.includes('error')) ??
    e?.message ??
    e
  console.log(`build:native: ggml span addon skipped (ggml backends unavailable): ${String(line).slice(0, 200)}`)
}
process.exit(0)
