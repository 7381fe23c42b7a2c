/**
 * Churn soak (issue #17): `npm run bench -- churn [--generations 100] [--tokens 24] [--seed 1]
 * [--model FILE]`. Five node processes serve the remote blocks of stories260K with spare capacity
 * ([1,4) twice, [1,2) once, [2,4) twice). During each generation a random peer may be killed
 * (SIGKILL) or stopped (SIGTERM, a planned leave) at a random moment, and a fresh peer for its
 * span is started in its place before the next one. Every generation's greedy tokens must equal
 * one process's; after the run every peer's metrics (`node start --metrics`) must show no session,
 * no KV position, no KV cache and no KV byte still held once their idle timeout passed, and no
 * peer that served the whole run may have grown by more than RSS_GROWTH_BOUND_MIB since the first
 * generation. Prints one JSON object (`ok`, the held figures, each survivor's RSS at start, after
 * the first generation and at the end, the median slowdown per failover: a generation's time over
 * the median clean one, per failover); exits 1 unless ok.
 */
import { createClient } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { type NodeHoldings, readNodeHoldings } from '../node/cli/metrics-scrape.js'
import { defaultModelPath } from '../node/paths.js'
import {
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  createTokenizer,
  errorCode,
  generateTokens,
  openModelFile
} from '../shards/index.js'
import { benchArgs } from './options.js'

const SPANS = ['1:4', '1:4', '1:2', '2:4', '2:4']
const IDLE_TIMEOUT_MS = 4_000
const ROUTE_TIMEOUT_MS = 180_000
const NODE_START_TIMEOUT_MS = 180_000
const PROMPT = 'Once upon a time'

function median(xs: number[]): number | null {
  if (xs.length === 0) return null
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

async function oneProcessTokens(modelPath: string, maxTokens: number): Promise<number[]> {
  const model = openModelFile(modelPath)
  try {
    const tokenizer = createTokenizer(model.vocabulary!)
    const out: number[] = []
    for await (const t of generateTokens({
      temperature: 0,
      edge: createEdge({ model }),
      pipeline: createLocalPipeline([createShard({ model, start: 0, end: model.config.nLayers })], 'local', 512),
      promptTokens: tokenizer.encode(PROMPT),
      maxTokens,
      stopIds: tokenizer.stopIds
    }))
      out.push(t)
    return out
  } finally {
    model.close()
  }
}

/** A surviving node's resident memory may grow by at most this over the run (a leak check, not a budget). */
const RSS_GROWTH_BOUND_MIB = 64

const alive = (n: LocalNode): boolean => n.process.exitCode === null && n.process.signalCode === null

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, { generations: '100', tokens: '24', seed: '1', 'churn-rate': '0.5', model: undefined })
  const generations = a.int('generations', 1)
  const maxTokens = a.int('tokens', 1)
  const churnRate = a.number('churn-rate', 0, false)
  const modelPath = a.string('model') ?? defaultModelPath()
  let rng = a.int('seed', 0) >>> 0 || 1
  const random = (): number => {
    rng ^= rng << 13
    rng ^= rng >>> 17
    rng ^= rng << 5
    return (rng >>> 0) / 4294967296
  }
  const args = [
    '--kernels',
    'reference',
    '--announce-interval',
    '300',
    '--idle-timeout',
    String(IDLE_TIMEOUT_MS),
    '--metrics',
    '127.0.0.1:0'
  ]
  // a loaded machine may take a while to start a node process
  const start = (layers: string, bootstrap?: string[]) =>
    startLocalNode({ model: modelPath, layers, bootstrap, args, startTimeoutMs: NODE_START_TIMEOUT_MS })
  const nodes: LocalNode[] = [await start(SPANS[0])]
  for (const span of SPANS.slice(1)) nodes.push(await start(span, [nodes[0].addrs[0]]))
  const expected = await oneProcessTokens(modelPath, maxTokens)
  const runs: Array<{ ms: number; failovers: number; identical: boolean; churn?: string; error?: string }> = []
  const killed: string[] = []
  // resident memory before any generation and after the first one (V8 warms up on the first)
  const atStart = await Promise.all(nodes.map((n) => readNodeHoldings(n)))
  let firstHeld: NodeHoldings[] = []
  try {
    // SIGINT/SIGTERM end the soak after the running generation; the summary covers what ran
    let stopping = false
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => (stopping = true))
    for (let g = 0; g < generations && !stopping; g++) {
      const live = nodes.filter(alive)
      // churn: a random peer of the generation's route, at a random moment after the route is chosen
      let churn: string | undefined
      let victim: LocalNode | undefined
      let timer: NodeJS.Timeout | undefined
      const churnNow = random() < churnRate
      const how = random() < 0.5 ? 'kill' : 'stop'
      const delayMs = Math.floor(random() * 80)
      const pickIndex = random()
      const client = await createClient({
        bootstrap: live.map((n) => n.addrs[0]),
        model: modelPath,
        kernels: createReferenceKernels(),
        canaries: false,
        banMs: 2_000,
        maxFailovers: 20,
        log: (e) => {
          if (!churnNow || victim || e.event !== 'route') return
          const onRoute = (e.route as Array<{ peerId: string }>).map((h) => h.peerId)
          const candidates = live.filter((n) => onRoute.includes(n.peerId))
          if (candidates.length === 0) return
          const v = candidates[Math.floor(pickIndex * candidates.length)]
          victim = v
          churn = `${how} ${v.layers.join(':')}`
          timer = setTimeout(() => (how === 'kill' ? v.kill() : void v.stop(2_000)), delayMs)
        }
      })
      try {
        // a loaded machine may take a while to let a fresh peer announce itself
        await client.view.waitForRoute(1, 4, ROUTE_TIMEOUT_MS)
        const t0 = performance.now()
        const r = await client.generate(PROMPT, { maxTokens, temperature: 0 })
        const ms = performance.now() - t0
        clearTimeout(timer)
        runs.push({ ms, failovers: r.report.failovers, identical: JSON.stringify(r.tokens) === JSON.stringify(expected), churn })
      } catch (err) {
        // a generation that failed (no route, failovers used up) is reported and fails the soak
        clearTimeout(timer)
        const code = errorCode(err) ?? (err as Error).name
        runs.push({ ms: 0, failovers: 0, identical: false, churn, error: `${code}: ${(err as Error).message}` })
      } finally {
        await client.close()
      }
      if (victim) {
        // a fresh peer for the span, joined through a survivor, before the next generation
        await victim.stop(2_000)
        killed.push(victim.peerId)
        const i = nodes.indexOf(victim)
        const survivor = nodes.find((n) => n !== victim && alive(n))
        nodes[i] = await start(victim.layers.join(':'), survivor ? [survivor.addrs[0]] : undefined)
      }
      // the resident memory of each node after the first generation: survivors must not grow with the run
      if (g === 0) firstHeld = await Promise.all(nodes.map((n) => readNodeHoldings(n)))
      process.stderr.write(`bench churn: generation ${g + 1}/${generations}${churn ? ` (${churn})` : ''}\n`)
    }
    // sessions of failed routes are closed best effort; what is left must go with the idle timeout
    const immediately = await Promise.all(nodes.map((n) => readNodeHoldings(n)))
    await new Promise((r) => setTimeout(r, IDLE_TIMEOUT_MS + 6_000))
    const afterIdle = await Promise.all(nodes.map((n) => readNodeHoldings(n)))
    const done = runs.filter((r) => r.error === undefined)
    const clean = median(done.filter((r) => r.failovers === 0).map((r) => r.ms)) ?? 0
    const perFailover = done.filter((r) => r.failovers > 0).map((r) => (r.ms - clean) / r.failovers)
    // nodes that served from before the first generation to the last: their memory then and now
    const survivors = afterIdle.flatMap((h) => {
      const start = atStart.find((f) => f.peerId === h.peerId)
      const first = firstHeld.find((f) => f.peerId === h.peerId)
      if (start === undefined || first === undefined) return []
      return [{ ...h, rssMiBAtStart: start.rssMiB, rssMiBAfterFirstGeneration: first.rssMiB, rssMiBAtEnd: h.rssMiB }]
    })
    const leaked = afterIdle.filter((h) => h.sessions !== 0 || h.kvTokens !== 0 || h.kvCaches !== 0 || h.kvBytes !== 0)
    const grew = survivors.filter((h) => h.rssMiBAtEnd - h.rssMiBAfterFirstGeneration > RSS_GROWTH_BOUND_MIB)
    const allTokensIdentical = runs.every((r) => r.identical)
    const ok = allTokensIdentical && leaked.length === 0 && grew.length === 0 && runs.length === generations
    console.log(
      JSON.stringify(
        {
          bench: 'churn',
          command: `npm run bench -- churn --generations ${generations} --tokens ${maxTokens} --seed ${a.string('seed')}`,
          ok,
          nodes: SPANS,
          generations,
          generationsRun: runs.length,
          failedGenerations: runs.flatMap((r, i) => (r.error === undefined ? [] : [{ generation: i, error: r.error }])),
          tokensPerGeneration: maxTokens,
          churnEvents: runs.filter((r) => r.churn).length,
          peersReplaced: killed.length,
          failovers: runs.reduce((a, r) => a + r.failovers, 0),
          allTokensIdentical,
          differingGenerations: runs.flatMap((r, i) => (r.identical ? [] : [i])),
          medianCleanGenerationMs: Math.round(clean),
          medianSlowdownPerFailoverMs: perFailover.length ? Math.round(median(perFailover) as number) : null,
          // sessions, KV positions, KV caches and their bytes on every node, right after the last
          // generation and once the idle timeout passed (all 0 then, or it is a leak)
          heldRightAfter: immediately,
          heldAfterIdleTimeout: afterIdle,
          leaks: leaked.length > 0,
          survivors,
          rssGrowthBoundMiB: RSS_GROWTH_BOUND_MIB,
          rssGrewPastBound: grew.map((h) => h.peerId)
        },
        null,
        2
      )
    )
    if (!ok) process.exitCode = 1
  } finally {
    await Promise.all(nodes.map((n) => n.stop(2_000)))
  }
}
