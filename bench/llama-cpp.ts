/**
 * node-llama-cpp side of `bench engine --compare llama-cpp`. node-llama-cpp@3.21.1 is installed
 * on demand into a cache directory (never a dependency of this package) and runs in a child
 * process, so its memory and threads do not disturb our own measurements. Failures (no
 * network, no prebuilt binary) come back as { ok: false, error } instead of throwing.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

export const LLAMA_CPP_VERSION = '3.21.1'

export interface LlamaCppResult {
  readonly ok: boolean
  readonly error?: string
  readonly version?: string
  readonly decodeTokensPerSecond?: number
  readonly prefillTokensPerSecond?: number
  readonly decodeRuns?: number[]
  readonly prefillRuns?: number[]
}

export function llamaCppDir(): string {
  return process.env.LAYERSWARM_LLAMA_CPP_DIR ?? join(homedir(), '.cache', 'layerswarm', 'llama-cpp')
}

export function ensureInstalled(dir: string): void {
  if (existsSync(join(dir, 'node_modules', 'node-llama-cpp', 'package.json'))) return
  mkdirSync(dir, { recursive: true })
  // --ignore-scripts: its postinstall would try to download or build llama.cpp; the prebuilt
  // @node-llama-cpp/<platform> packages come in as optional dependencies instead.
  execFileSync(
    'npm',
    ['install', '--prefix', dir, '--no-audit', '--no-fund', '--ignore-scripts', `node-llama-cpp@${LLAMA_CPP_VERSION}`],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 600_000
    }
  )
}

// Runs in the child (ESM, imported from the cache dir). Prints one JSON line.
const CHILD = `
import { getLlama, LlamaLogLevel } from 'node-llama-cpp'
const [modelPath, threads, promptTokens, genTokens, runs, vocab] = process.argv.slice(2).map((v, i) => (i === 0 ? v : Number(v)))
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, maxThreads: threads })
const model = await llama.loadModel({ modelPath, gpuLayers: 0 })
const context = await model.createContext({ contextSize: promptTokens + genTokens + 8, threads, batchSize: Math.max(512, promptTokens) })
const seq = context.getSequence()
const prompt = Array.from({ length: promptTokens }, (_, i) => 3 + ((i * 7919) % (vocab - 3)))
const prefill = [], decode = []
for (let r = 0; r < runs; r++) {
  await seq.clearHistory()
  let t0 = performance.now()
  await seq.evaluateWithoutGeneratingNewTokens(prompt)
  prefill.push(promptTokens / ((performance.now() - t0) / 1000))
  let n = 0
  let t1 = 0
  // greedy; the first generated token comes from the prefill logits, time the rest
  for await (const tok of seq.evaluate([prompt[prompt.length - 1]], { temperature: 0 })) {
    if (n === 0) t1 = performance.now()
    if (++n > genTokens) break
  }
  decode.push(genTokens / ((performance.now() - t1) / 1000))
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
console.log(JSON.stringify({ ok: true, prefill, decode, prefillMedian: median(prefill), decodeMedian: median(decode) }))
await context.dispose(); await model.dispose(); await llama.dispose()
`

export function runLlamaCpp(
  modelPath: string,
  threads: number,
  promptTokens: number,
  genTokens: number,
  runs: number,
  vocab: number
): LlamaCppResult {
  const dir = llamaCppDir()
  try {
    ensureInstalled(dir)
  } catch (e) {
    const err = e as { stderr?: Buffer; message?: string }
    return {
      ok: false,
      error: `npm install node-llama-cpp@${LLAMA_CPP_VERSION} into ${dir} failed: ${(err.stderr?.toString() || err.message || String(e)).trim().slice(-400)}`
    }
  }
  const script = join(dir, 'layerswarm-bench.mjs')
  writeFileSync(script, CHILD)
  const r = spawnSync(
    process.execPath,
    [script, modelPath, String(threads), String(promptTokens), String(genTokens), String(runs), String(vocab)],
    {
      cwd: dir,
      encoding: 'utf8',
      timeout: 1_800_000
    }
  )
  const line = r.stdout?.trim().split('\n').pop() ?? ''
  try {
    const out = JSON.parse(line)
    return {
      ok: true,
      version: LLAMA_CPP_VERSION,
      decodeTokensPerSecond: round(out.decodeMedian),
      prefillTokensPerSecond: round(out.prefillMedian),
      decodeRuns: out.decode.map(round),
      prefillRuns: out.prefill.map(round)
    }
  } catch {
    return {
      ok: false,
      error: `node-llama-cpp run failed (exit ${r.status}${r.signal ? `, ${r.signal}` : ''}): ${(r.stderr || line).trim().slice(-400)}`
    }
  }
}

function round(x: number): number {
  return Math.round(x * 100) / 100
}
