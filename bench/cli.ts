/**
 * `npm run bench -- <name> [options]`: one module per benchmark, each printing one JSON object.
 * Add a benchmark by adding its module to BENCHES (a module exports main(argv)).
 */
import { availableParallelism } from 'node:os'
import { isQuantDType, type QuantDType } from '../shards/quant/quant-blocks.js'

type BenchMain = (argv: string[]) => Promise<void>

const BENCHES: Record<string, () => Promise<BenchMain>> = {
  'big-swarm': async () => (await import('./big-swarm.js')).main,
  canary: async () => (await import('./canary.js')).main,
  churn: async () => (await import('./churn.js')).main,
  collusion: async () => (await import('./collusion.js')).main,
  constrain: async () => (await import('./constrain.js')).main,
  failover: async () => (await import('./failover.js')).main,
  fetch: async () => (await import('./fetch.js')).main,
  'first-token': async () => (await import('./first-token.js')).main,
  hop: async () => (await import('./hop.js')).main,
  load: async () => (await import('./load.js')).main,
  scale: async () => (await import('./scale.js')).main,
  seal: async () => (await import('./seal.js')).main,
  engine: async () => (await import('./engine.js')).main,
  'family-speed': async () => (await import('./family-speed.js')).main,
  crosscheck: async () => (await import('./crosscheck/run.js')).main,
  discovery: async () => (await import('./discovery.js')).main,
  'node-memory': async () => (await import('./node-memory.js')).main,
  kernels: async () => async (argv) => {
    // The 8b shape's decode matmuls, plain against rows8 layout (bench/kernels-8b.ts).
    if (argv.includes('--shape')) return (await import('./kernels-8b.js')).main8b(argv)
    // The calibrated native/WebAssembly choice per dtype and shape class (bench/kernels-choice.ts).
    if (argv.includes('--choice')) {
      const at = argv.indexOf('--threads')
      const threads = at >= 0 ? Number(argv[at + 1]) : undefined
      if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1)) throw new Error('--threads: a positive integer')
      const { runKernelChoiceBench } = await import('./kernels-choice.js')
      console.log(JSON.stringify(await runKernelChoiceBench(threads), null, 2))
      return
    }
    const types = argv.indexOf('--types')
    if (types >= 0) {
      // Block types: CPU ns per super-block on one thread (bench/kernels-quant.ts).
      const { runQuantKernelBench } = await import('./kernels-quant.js')
      const list = (argv[types + 1] ?? '').split(',').filter((t) => t !== '')
      const known = (t: string): t is QuantDType | 'q8_0' => isQuantDType(t) || t === 'q8_0'
      const bad = list.find((t) => !known(t))
      if (list.length === 0 || bad !== undefined) throw new Error(`--types: not a block type: ${bad ?? '(none)'}`)
      const opts = { types: list.filter(known), quick: argv.includes('--quick'), wasm: argv.includes('--wasm') }
      console.log(JSON.stringify(runQuantKernelBench(opts), null, 2))
      return
    }
    const { runKernelBench } = await import('./kernels.js')
    console.log(JSON.stringify(runKernelBench({ quick: argv.includes('--quick') }), null, 2))
  },
  swarm: async () => (await import('./swarm.js')).main,
  rollback: async () => (await import('./rollback.js')).main,
  'swarm-canary': async () => (await import('./swarm-canary.js')).main,
  'verified-stream': async () => (await import('./verified-stream.js')).main,
  wan: async () => (await import('./wan.js')).main,
  wire: async () => (await import('./wire-compression.js')).main
}

const [name, ...rest] = process.argv.slice(2)
const load = name === undefined ? undefined : BENCHES[name]
if (!load) {
  process.stderr.write(
    `usage: npm run bench -- <${Object.keys(BENCHES).join('|')}> [options]  (${availableParallelism()} cores here)\n`
  )
  process.exitCode = 2
} else {
  try {
    await (await load())(rest)
  } catch (e) {
    process.stderr.write(`bench ${name}: ${e instanceof Error ? e.message : String(e)}\n`)
    process.exitCode = 1
  }
}
