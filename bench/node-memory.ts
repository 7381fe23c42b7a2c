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
import { parseArgs } from 'node:util'
import { startLocalNode } from '../node/local-swarm.js'
import { openModelFile } from '../shards/index.js'

const MB = 2 ** 20

/** Peak and current resident bytes of a process (VmHWM, VmRSS). */
function residentBytes(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024
  return { peak: kb('VmHWM'), now: kb('VmRSS') }
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      layers: { type: 'string' },
      tokens: { type: 'string', default: '8' },
      'kv-dtype': { type: 'string', default: 'f32' },
      // the client's canaries (default rate unless told; 0: none, the client then runs no whole-model canary traces)
      'canary-rate': { type: 'string' }
    }
  })
  const kv = values['kv-dtype']
  if (kv !== 'f32' && kv !== 'f16' && kv !== 'q8_0') throw new Error('bench node-memory: --kv-dtype f32|f16|q8_0')
  if (!values.model)
    throw new Error('bench node-memory: --model FILE is required (an 8b-shaped Q4_K_M GGUF, see docs/performance.md)')
  const model = openModelFile(values.model)
  const n = model.config.nLayers
  const dtype = model.weightDType
  model.close()
  const layers = values.layers ?? `0:${n}`
  const node = await startLocalNode({
    model: values.model,
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
    const args = [cli, 'generate', '--model', values.model, '--bootstrap', node.addrs[0], ...edge]
    args.push('--prompt', 'Once upon a time', '--max-tokens', values.tokens, '--temperature', '0', '--json')
    if (values['canary-rate'] !== undefined) args.push('--canary-rate', values['canary-rate'])
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
          model: values.model,
          dtype,
          layers,
          kvDType: kv,
          canaryRate: values['canary-rate'] ?? 'default',
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
