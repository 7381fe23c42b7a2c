/**
 * llama.cpp built from source with native CPU flags, for the cross-checks and `bench engine
 * --compare llama-cpp`. Opt-in only: the source is the git bundle inside the node-llama-cpp
 * npm package (pinned, installed into the cache directory, never a dependency of this
 * package), cloned and built with cmake into that cache directory, outside the repository;
 * neither its code nor its binaries ever enter the repository. Our own greedy driver
 * (llama-greedy.cc, next to this file) is compiled against the built libllama.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ensureInstalled, LLAMA_CPP_VERSION, llamaCppDir } from '../llama-cpp.js'

export interface NativeLlamaCpp {
  readonly dir: string
  readonly quantize: string
  readonly greedy: string
  /** Our llama-tokens driver: llama_tokenize over many strings. */
  readonly tokens: string
  /** llama.cpp's source tree (gguf-py, the converter). */
  readonly src: string
  /** llama.cpp's release tag inside node-llama-cpp@LLAMA_CPP_VERSION. */
  readonly tag: string
}

/** The repository root (where package.json names layerswarm), from src or dist. */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 6; i++) {
    const pkg = join(dir, 'package.json')
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).name === 'layerswarm') return dir
    dir = dirname(dir)
  }
  throw new Error('cannot find the layerswarm package root')
}

/**
 * cmake flags: the machine's own ISA (-march=native through GGML_NATIVE), without AMX: on this
 * VM the AMX tile kernels fault (SIGSEGV in ggml_backend_amx_mul_mat), so they are compiled out.
 */
const CMAKE_FLAGS = [
  '-DCMAKE_BUILD_TYPE=Release',
  '-DGGML_NATIVE=ON',
  '-DGGML_OPENMP=ON',
  '-DLLAMA_CURL=OFF',
  '-DBUILD_SHARED_LIBS=ON',
  '-DLLAMA_BUILD_TESTS=OFF',
  '-DLLAMA_BUILD_SERVER=OFF',
  '-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16',
  '-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'
]

/** Build (once; later calls find the binaries) and return the tools. `log` gets progress lines. */
export function buildNativeLlamaCpp(log: (line: string) => void = () => {}): NativeLlamaCpp {
  const dir = llamaCppDir()
  const bin = join(dir, 'build', 'bin')
  const quantize = join(bin, 'llama-quantize')
  const greedy = join(bin, 'llama-greedy')
  const tokens = join(bin, 'llama-tokens')
  const pkg = join(dir, 'node_modules', 'node-llama-cpp', 'llama')
  if (!existsSync(join(pkg, 'gitRelease.bundle'))) {
    log(`installing node-llama-cpp@${LLAMA_CPP_VERSION} into ${dir} (its llama.cpp source bundle)`)
    ensureInstalled(dir)
  }
  const tag = JSON.parse(readFileSync(join(pkg, 'llama.cpp.info.json'), 'utf8')).tag as string
  const src = join(dir, 'src')
  if (!existsSync(join(src, 'CMakeLists.txt'))) {
    log(`cloning llama.cpp ${tag} from the bundle into ${src}`)
    execFileSync('git', ['clone', '--quiet', join(pkg, 'gitRelease.bundle'), src], { stdio: 'inherit' })
  }
  if (!existsSync(quantize)) {
    log('building llama.cpp (cmake, -march=native; several minutes on 2 cores)')
    const gen = existsSync('/usr/bin/ninja') ? ['-G', 'Ninja'] : []
    execFileSync('cmake', ['-S', src, '-B', join(dir, 'build'), ...gen, ...CMAKE_FLAGS], {
      stdio: ['ignore', 'ignore', 'inherit']
    })
    execFileSync('cmake', ['--build', join(dir, 'build'), '-j', '2', '--target', 'llama-quantize', 'llama-bench'], {
      stdio: ['ignore', 'ignore', 'inherit']
    })
  }
  // Our drivers are compiled when missing or older than their source (a checkout that changed them).
  for (const [name, out] of [
    ['llama-greedy.cc', greedy],
    ['llama-tokens.cc', tokens]
  ] as const) {
    const driver = join(repoRoot(), 'bench', 'crosscheck', name)
    if (existsSync(out) && statSync(out).mtimeMs >= statSync(driver).mtimeMs) continue
    log(`compiling bench/crosscheck/${name} against libllama`)
    execFileSync(
      process.env.CXX || 'g++',
      [
        '-O2',
        '-std=c++17',
        '-I',
        join(src, 'include'),
        '-I',
        join(src, 'ggml', 'include'),
        driver,
        '-L',
        bin,
        '-lllama',
        '-lggml',
        '-lggml-base',
        `-Wl,-rpath,${bin}`,
        '-o',
        out
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] }
    )
  }
  return { dir, src, quantize, greedy, tokens, tag }
}

/** llama-quantize `src` into `dst` as `type` (a llama-quantize type name such as Q4_K_M). */
export function llamaQuantize(tools: NativeLlamaCpp, src: string, dst: string, type: string): void {
  execFileSync(tools.quantize, [src, dst, type], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 1_800_000 })
}

export interface GreedyRun {
  /** The prompt ids llama.cpp decoded from (given, or its tokenization of the text). */
  readonly prompt: number[]
  readonly tokens: number[]
  /** llama.cpp's top-1 minus top-2 logit per step. */
  readonly margins: number[]
  readonly prefillMs: number
  readonly decodeMs: number
  readonly decodeSteps: number
}

/** Greedy decoding in llama.cpp: `n` new tokens after the prompt ids, timed as our engine bench. */
export function llamaGreedy(
  tools: NativeLlamaCpp,
  model: string,
  threads: number,
  n: number,
  prompt: readonly number[] | { readonly text: string; readonly chat?: boolean },
  /** f32 KV cache and attention without flash attention (llama-greedy's LLAMA_GREEDY_F32_KV). */
  opts: { f32Kv?: boolean } = {}
): GreedyRun {
  const arg = 'text' in prompt ? `${prompt.chat ? 'chat' : 'text'}:${prompt.text}` : prompt.join(',')
  const out = execFileSync(tools.greedy, [model, String(threads), String(n), arg], {
    env: opts.f32Kv ? { ...process.env, LLAMA_GREEDY_F32_KV: '1' } : process.env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 1_800_000,
    maxBuffer: 1 << 24
  })
  return JSON.parse(out.trim().split('\n').pop() ?? '{}') as GreedyRun
}

/**
 * llama.cpp's tokenization of each string (llama_tokenize, vocabulary only, one process), with
 * control tokens parsed when `special`, and BOS added when `addBos` and the file says so.
 */
export function llamaTokenize(
  tools: NativeLlamaCpp,
  model: string,
  strings: readonly string[],
  special: boolean,
  addBos: boolean,
  workDir: string
): number[][] {
  if (strings.some((s) => s.includes('\0'))) throw new Error('llamaTokenize: strings must not contain NUL')
  const input = join(workDir, `strings-${process.pid}.bin`)
  writeFileSync(input, strings.join('\0'))
  try {
    const out = execFileSync(tools.tokens, [model, input, special ? '1' : '0', addBos ? '1' : '0'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 600_000,
      maxBuffer: 1 << 28
    })
    const lines = out.split('\n').slice(0, strings.length)
    return lines.map((l) => (l === '' ? [] : l.split(' ').map(Number)))
  } finally {
    rmSync(input, { force: true })
  }
}
