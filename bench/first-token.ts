/**
 * A new client's first token and decode with canaries on against `--canary-rate 0` (issue 31):
 * `npm run bench -- first-token [--model FILE] [--rounds 3] [--max-tokens 32] [--prompt TEXT]`.
 *
 * As a new user runs it: two `layerswarm node start` processes on 127.0.0.1 serve a
 * Qwen-3-vocabulary (151,936 tokens) Q4_K_M file that `layerswarm make-model --shape 42m
 * --vocab qwen --arch qwen3 --dtype q4_k_m` writes (once, to the temp folder; `--model` takes
 * another), and each measured generation is a fresh `layerswarm generate --bootstrap ... --json`
 * process: a new client every time, canaries on (the default) and off (`--canary-rate 0`)
 * interleaved in the same run on the same warm nodes. A third kind, `returning`, keeps a trust
 * file and the canary secret beside it (`--trust-file`): its set, built by one unmeasured
 * `--verified-stream` run first (which waits for it), is kept between runs
 * (client/verification/canaries/canary-set-store.ts), and its peers' records too (no start-up burst). Time to first token is the CLI's `prefillMs`, decode its
 * `decodeTokensPerSecond`, the whole run (`wallMs`) the generate process from start to exit (a
 * new client's first generation ends once its peers are checked: issue 31); medians over the
 * rounds and the ratios to off. Prints one JSON object.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createClient } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { openModelFile } from '../shards/index.js'
import { benchArgs } from './options.js'
import { median, round } from './swarm-stats.js'

const run = promisify(execFile)
const CLI = fileURLToPath(new URL('../node/cli.js', import.meta.url))

interface Stats {
  readonly prefillMs: number
  readonly decodeTokensPerSecond: number
}

/** A measured run: the CLI's stats, the canaries it sent, and the whole process's wall time (start to exit). */
interface Run extends Stats {
  readonly canariesSent: number
  readonly wallMs: number
}

/** The Qwen-vocabulary Q4_K_M test file, made with the project's own make-model once. */
async function qwenModel(): Promise<string> {
  const path = join(tmpdir(), 'layerswarm-bench-first-token-42m-qwen3-q4_k_m.gguf')
  if (!existsSync(path)) {
    process.stderr.write(`bench first-token: writing ${path}\n`)
    const args = ['make-model', '--shape', '42m', '--vocab', 'qwen', '--arch', 'qwen3', '--rope-theta', '1000000']
    await run(process.execPath, [CLI, ...args, '--dtype', 'q4_k_m', '--out', `${path}.part`], { maxBuffer: 1 << 24 })
    renameSync(`${path}.part`, path) // only once complete
  }
  return path
}

/**
 * The returning client's kept set and peer records, as a client that stayed up makes them: one
 * generation with the SDK (the options `--trust-file` gives), then the set's background build
 * waited for (a CLI run ends with its generation, which a new client's first one no longer waits
 * for the set: issue 31), then a second generation, whose canaries give the peers their records.
 */
async function keepSet(model: string, bootstrap: string, trustFile: string, o: { prompt: string; maxTokens: number }) {
  const secretFile = join(dirname(trustFile), 'canary-secret')
  const client = await createClient({ bootstrap: [bootstrap], model, canaries: { trustFile, secretFile } })
  try {
    const file = openModelFile(model)
    const blocks = file.config.nLayers
    file.close()
    await client.view.waitForRoute(1, blocks - 1, 60_000)
    await client.generate(o.prompt, { maxTokens: o.maxTokens, temperature: 0 })
    // the SDK keeps its canary monitor to itself: a benchmark may wait on it
    await (client as unknown as { canaries?: { canariesReady(): Promise<void> } }).canaries?.canariesReady()
    await client.generate(o.prompt, { maxTokens: o.maxTokens, temperature: 0, verifiedStream: true })
  } finally {
    await client.close()
  }
}

async function generate(
  model: string,
  bootstrap: string,
  o: { prompt: string; maxTokens: number; extra: string[]; home: string }
) {
  const args = ['generate', '--model', model, '--bootstrap', bootstrap, '--prompt', o.prompt]
  const t0 = performance.now()
  const { stdout } = await run(
    process.execPath,
    [CLI, ...args, '--max-tokens', String(o.maxTokens), '--temperature', '0', '--json', ...o.extra],
    { maxBuffer: 1 << 26, env: { ...process.env, LAYERSWARM_HOME: o.home } }
  )
  const out = JSON.parse(stdout) as { stats: Stats; report: { canaries: { canariesSent: number }[] } }
  const wallMs = performance.now() - t0
  return { ...out.stats, canariesSent: out.report.canaries.reduce((n, p) => n + p.canariesSent, 0), wallMs }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, { model: undefined, rounds: '3', 'max-tokens': '32', prompt: 'Once upon a time' })
  const rounds = a.int('rounds', 1)
  const maxTokens = a.int('max-tokens', 2)
  const model = a.string('model') ?? (await qwenModel())
  const home = mkdtempSync(join(tmpdir(), 'layerswarm-bench-first-token-'))
  const trust = join(home, 'trust.json')
  const nodes: LocalNode[] = []
  try {
    const args = ['--ephemeral-identity']
    nodes.push(await startLocalNode({ model, layers: '1:4', args, startTimeoutMs: 600_000 }))
    nodes.push(await startLocalNode({ model, layers: '4:7', bootstrap: [nodes[0].addrs[0]], args, startTimeoutMs: 600_000 }))
    const bootstrap = nodes[0].addrs[0]
    const base = { prompt: a.required('prompt', 'text'), maxTokens, home }
    const kinds: Record<string, string[]> = { off: ['--canary-rate', '0'], on: [], returning: ['--trust-file', trust] }
    // unmeasured: JIT and routes on the nodes; the returning client's kept set and peer records
    await generate(model, bootstrap, { ...base, extra: kinds.off })
    await keepSet(model, bootstrap, trust, base)
    const runs: Record<string, Run[]> = { off: [], on: [], returning: [] }
    for (let r = 0; r < rounds; r++)
      for (const [kind, extra] of Object.entries(kinds)) runs[kind].push(await generate(model, bootstrap, { ...base, extra }))
    const ttft = (k: string) => median(runs[k].map((s) => s.prefillMs))
    const rate = (k: string) => median(runs[k].map((s) => s.decodeTokensPerSecond))
    const wall = (k: string) => median(runs[k].map((s) => s.wallMs))
    const summary = (k: string) => ({
      firstTokenMs: round(ttft(k)),
      decodeTokensPerSecond: round(rate(k), 2),
      firstTokenRatio: round(ttft(k) / ttft('off'), 2),
      decodeRatio: round(rate(k) / rate('off'), 2),
      // the whole generate process, start to exit: a new client's first generation ends only once its peers are checked
      wallMs: round(wall(k)),
      wallRatio: round(wall(k) / wall('off'), 2),
      canariesSent: runs[k].map((s) => s.canariesSent)
    })
    console.log(
      JSON.stringify(
        {
          bench: 'first-token',
          model,
          nodes: 2,
          maxTokens,
          rounds,
          off: summary('off'),
          on: summary('on'),
          returning: summary('returning'),
          runs
        },
        null,
        2
      )
    )
  } finally {
    await Promise.all(nodes.map((n) => n.stop()))
    rmSync(home, { recursive: true, force: true })
  }
}
