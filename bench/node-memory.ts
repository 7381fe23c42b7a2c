/**
 * `npm run bench -- node-memory --model FILE [--layers A:B] [--tokens 8] [--kv-dtype f32]
 * [--canary-rate R]`: the
 * peak resident memory of a real node process (`node start`) serving a span, after a client
 * generated a few tokens through it (the client runs blocks outside [A, B) itself), against
 * the budget of issue #14:
 *   peak RSS ≤ 1.15 × (span weights + reserved KV) + 150 MB.
 * Reserved KV is the node's `kvBytes` (one session of the model's full context on the span,
 * from node start's JSON line). Prints one JSON object. Linux (reads /proc/PID/status VmHWM).
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startLocalNode } from '../node/cli/local-swarm.js'
import { openModelFile } from '../shards/index.js'
import { benchArgs, TENSOR_DTYPES } from './options.js'

const MB = 2 ** 20

/** Peak and current resident bytes of a process (VmHWM, VmRSS). */
function residentBytes(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024
  return { peak: kb('VmHWM'), now: kb('VmRSS') }
}

export async function main(argv: string[]): Promise<void> {
  const opts = benchArgs(argv, {
    model: undefined,
    layers: undefined,
    tokens: '8',
    'kv-dtype': 'f32',
    // the client's canaries (default rate unless told; 0: none, the client then runs no whole-model canary traces)
    'canary-rate': undefined
  })
  const kv = opts.oneOf('kv-dtype', TENSOR_DTYPES)
  const modelPath = opts.required('model', 'FILE (an 8b-shaped Q4_K_M GGUF, see docs/performance.md)')
  const tokens = String(opts.int('tokens', 1))
  const canaryRate = opts.string('canary-rate')
  const model = openModelFile(modelPath)
  const n = model.config.nLayers
  const dtype = model.weightDType
  model.close()
  const layers = opts.string('layers') ?? `0:${n}`
  const node = await startLocalNode({
    model: modelPath,
    layers,
    args: ['--log-level', 'info', '--kv-dtype', kv],
    startTimeoutMs: 600_000
  })
  try {
    // node start's JSON line (startLocalNode spreads all of it into the handle)
    const info = node as unknown as { kernels?: string; weightBytes?: number; kvBytes?: number }
    const afterStart = residentBytes(node.process.pid as number)
    // A client generating through the node: its session reserves KV and runs every block.
    const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'node', 'cli.js')
    // The client runs the blocks outside the node's span itself (its edge), so a route is the
    // node alone: a span smaller than the model used to leave blocks nobody served (NO_ROUTE).
    const [a, b] = layers.split(':').map(Number)
    const edge = ['--edge-first', String(a), '--edge-last', String(n - b)]
    const args = [cli, 'generate', '--model', modelPath, '--bootstrap', node.addrs[0], ...edge]
    args.push('--prompt', 'Once upon a time', '--max-tokens', tokens, '--temperature', '0', '--json')
    if (canaryRate !== undefined) args.push('--canary-rate', canaryRate)
    const t0 = performance.now()
    let generated: { tokens: number[]; stats?: Record<string, number> } = { tokens: [] }
    // The node's span announcement reaches a new client within a few seconds: retry until then.
    for (let attempt = 1; ; attempt++) {
      try {
        const out = execFileSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 3_600_000 })
        generated = JSON.parse(out.toString().trim().split('\n').at(-1) ?? '{}')
        break
      } catch (e) {
        if (attempt >= 5 || !String((e as { stderr?: Buffer }).stderr ?? '').includes('NO_ROUTE')) throw e
        await new Promise((r) => setTimeout(r, 3000))
      }
    }
    const generateMs = performance.now() - t0
    const afterGenerate = residentBytes(node.process.pid as number)
    const weightBytes = info.weightBytes ?? Number.NaN
    const kvBytes = info.kvBytes ?? Number.NaN
    const budget = 1.15 * (weightBytes + kvBytes) + 150 * MB
    console.log(
      JSON.stringify(
        {
          bench: 'node-memory',
          model: modelPath,
          dtype,
          layers,
          kvDType: kv,
          canaryRate: canaryRate ?? 'default',
          // the whole generation finished: every token the client asked for came back
          tokensGenerated: generated.tokens.length,
          clientStats: generated.stats,
          kernels: info.kernels,
          weightBytes,
          kvBytes,
          peakRssBytes: afterGenerate.peak,
          rssAfterStartBytes: afterStart.now,
          rssAfterGenerateBytes: afterGenerate.now,
          generateMs: Math.round(generateMs),
          budgetBytes: Math.round(budget),
          withinBudget: afterGenerate.peak <= budget,
          peakOverWeightsPlusKv: Math.round((afterGenerate.peak / (weightBytes + kvBytes)) * 1000) / 1000
        },
        null,
        2
      )
    )
  } finally {
    await node.stop()
  }
}
