/**
 * `npm run bench -- rollback [--clients 20] [--forwarding relay|chain]
 * [--interface cli|sdk|gateway|gateway-stream] [--tokens 64]`: issue 16's case at scale.
 *
 * Three real node processes on 127.0.0.1 with the bundled 4-block stories model: a tamperer
 * (`--tamper noise --tamper-size 0.5 --tamper-rate 1`) serving [1,4) in one hop, so a fresh
 * client's route takes it first, and two honest peers serving [1,3) and [3,4). Each of
 * `--clients` fresh clients (a new secret, no trust file) generates greedily from the reference
 * prompt through one interface:
 *  - `sdk`: `client.generate()` in this process;
 *  - `cli`: `layerswarm generate --wire f32 --json` in a child process (its `completion`);
 *  - `gateway` / `gateway-stream`: a fresh `layerswarm api` gateway (in this process) answering
 *    one /v1/completions request, whole or streamed (SSE, `layerswarm` rollback events applied).
 * The honest text is llama2.c's greedy continuation (test/vectors). Prints one JSON object: in how
 * many clients the returned text equals it, in how many the tamperer was on the first route, and
 * in how many it was convicted (where the interface reports it).
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createClient, type Forwarding } from '../client/index.js'
import { runApi } from '../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { createLogger } from '../node/log.js'
import { defaultModelPath, packageRoot } from '../node/paths.js'
import { createReferenceKernels, createTokenizer, openModelFile } from '../shards/index.js'
import { benchArgs, FORWARDINGS } from './options.js'
import { type GatewayReport, readSse } from './rollback-sse.js'

const INTERFACES = ['cli', 'sdk', 'gateway', 'gateway-stream'] as const
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

/** What one fresh client returned: its text, and what its report says (when it has one). */
interface Outcome {
  readonly text: string
  readonly firstRoute?: readonly string[]
  readonly convicted?: readonly string[]
  readonly rollbacks?: number
}

interface Swarm {
  readonly bootstrap: string[]
  readonly model: string
  readonly prompt: string
  readonly tokens: number
  readonly forwarding: Forwarding
}

async function viaSdk(s: Swarm): Promise<Outcome> {
  const client = await createClient({
    bootstrap: s.bootstrap,
    model: s.model,
    kernels: createReferenceKernels(),
    forwarding: s.forwarding
  })
  try {
    await client.view.waitForRoute(1, 4, 20_000)
    const r = await client.generate(s.prompt, { maxTokens: s.tokens, temperature: 0 })
    return {
      text: r.text,
      firstRoute: r.report.routes[0]?.map((h) => h.peerId),
      convicted: r.convicted,
      rollbacks: r.report.rollbacks.length
    }
  } finally {
    await client.close()
  }
}

function viaCli(s: Swarm): Outcome {
  const cli = join(packageRoot(), 'dist', 'node', 'cli.js')
  const args = ['generate', '--bootstrap', s.bootstrap.join(','), '--model', s.model, '--prompt', s.prompt]
  // f32 on the wire, as the SDK and gateway runs: the honest text is llama2.c's f32 one
  args.push('--max-tokens', String(s.tokens), '--temperature', '0', '--forwarding', s.forwarding, '--wire', 'f32', '--json')
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 600_000 })
  if (r.status !== 0) return { text: `(exit ${r.status}: ${r.stderr.trim().split('\n').at(-1)})` }
  const result = JSON.parse(r.stdout) as {
    completion: string
    convicted: string[]
    report: { routes: { peerId: string }[][]; rollbacks: unknown[] }
  }
  return {
    text: result.completion,
    firstRoute: result.report.routes[0]?.map((h) => h.peerId),
    convicted: result.convicted,
    rollbacks: result.report.rollbacks.length
  }
}

async function viaGateway(s: Swarm, stream: boolean): Promise<Outcome> {
  // a fresh gateway is a fresh client: the tamperer is its first choice again
  const api = await runApi(
    {
      bootstrap: s.bootstrap.join(','),
      listen: '127.0.0.1:0',
      maxConcurrent: 2,
      edgeFirst: 1,
      edgeLast: 1,
      forwarding: s.forwarding,
      wire: 'f32',
      canaryRate: 0.03,
      routeTimeout: 20_000,
      logLevel: 'silent',
      model: s.model
    },
    createLogger({ level: 'silent' })
  )
  try {
    const res = await fetch(`${api.gateway.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stories260K', prompt: s.prompt, max_tokens: s.tokens, temperature: 0, stream })
    })
    if (!res.ok) return { text: `(HTTP ${res.status}: ${await res.text()})` }
    type Whole = { choices: { text: string }[]; layerswarm?: GatewayReport }
    const whole = async () => {
      const b = (await res.json()) as Whole
      return { text: b.choices[0].text, layerswarm: b.layerswarm, rollbacks: undefined as number | undefined }
    }
    const got = stream ? await readSse(res) : await whole()
    const report = got.layerswarm?.report
    return {
      text: got.text,
      firstRoute: report?.routes?.[0]?.map((h) => h.peerId),
      convicted: got.layerswarm?.convicted,
      // streamed: the rollback events the consumer saw; whole: the report's reruns
      rollbacks: got.rollbacks ?? report?.rollbacks?.length
    }
  } finally {
    await api.close()
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, { clients: '20', forwarding: 'relay', interface: 'sdk', tokens: '64' })
  const clients = a.int('clients', 1)
  const tokens = a.int('tokens', 1)
  if (tokens > 200) a.fail('--tokens in [1, 200]')
  const forwarding = a.oneOf('forwarding', FORWARDINGS)
  const via = a.oneOf('interface', INTERFACES)
  const model = defaultModelPath()
  const ref = JSON.parse(
    readFileSync(join(packageRoot(), 'test', 'vectors', 'stories260K_greedy_once_upon_a_time.json'), 'utf8')
  ) as { prompt: string; generated_tokens: number[] }
  const file = openModelFile(model)
  const honest = createTokenizer(file.vocabulary!).decode(ref.generated_tokens.slice(0, tokens))
  file.close()
  const nodes: LocalNode[] = []
  const started = performance.now()
  const outcomes: Outcome[] = []
  try {
    const tamper = ['--tamper', 'noise', '--tamper-size', '0.5', '--tamper-rate', '1']
    nodes.push(await startLocalNode({ model, layers: '1:4', args: [...FAST, ...tamper], startTimeoutMs: 120_000 }))
    const first = [nodes[0].addrs[0]]
    for (const layers of ['1:3', '3:4'])
      nodes.push(await startLocalNode({ model, layers, bootstrap: first, args: FAST, startTimeoutMs: 120_000 }))
    const s: Swarm = { bootstrap: nodes.map((n) => n.addrs[0]), model, prompt: ref.prompt, tokens, forwarding }
    for (let i = 0; i < clients; i++) {
      const o = via === 'sdk' ? await viaSdk(s) : via === 'cli' ? viaCli(s) : await viaGateway(s, via === 'gateway-stream')
      outcomes.push(o)
      process.stderr.write(`${JSON.stringify({ client: i, honest: o.text === honest, rollbacks: o.rollbacks })}\n`)
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()))
  }
  const tamperer = nodes[0].peerId
  const known = <T>(f: (o: Outcome) => T | undefined) => outcomes.filter((o) => f(o) !== undefined)
  console.log(
    JSON.stringify(
      {
        bench: 'rollback',
        interface: via,
        forwarding,
        clients,
        tokens,
        honestText: outcomes.filter((o) => o.text === honest).length,
        tampererOnFirstRoute: known((o) => o.firstRoute).filter((o) => o.firstRoute!.includes(tamperer)).length,
        tampererConvicted: known((o) => o.convicted).filter((o) => o.convicted!.includes(tamperer)).length,
        reportedBy: known((o) => o.convicted).length,
        rollbacks: known((o) => o.rollbacks).reduce((n, o) => n + o.rollbacks!, 0),
        seconds: Math.round((performance.now() - started) / 1000),
        different: outcomes.filter((o) => o.text !== honest).map((o) => o.text.slice(0, 120))
      },
      null,
      2
    )
  )
}
