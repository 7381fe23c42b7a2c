import { writeFileSync } from 'node:fs'
import { createClient } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { createReferenceKernels } from '../shards/index.js'
import { type CollusionScores, type SeenStep, scoreCollusion, stepsSeen } from './collusion-classify.js'
import { benchArgs, COLLUSION_DEFAULTS, collusionOptions } from './options.js'

/*
 * `npm run bench -- collusion`: two colluding logging peers on a 2-hop route (issue #39). Two
 * node processes serve the remote blocks between them, each logging every request it gets
 * (`--log-level trace`); a client with canaries generates sessions through them, relayed and
 * chained; the peers' pooled logs are scored by the classifiers of collusion-classify.ts (by ids,
 * timing, sizes and order). Prints one JSON object: per forwarding mode the accuracies, the step
 * counts and the canary overhead (decoy steps per real step, and the decode time per token
 * against the same sessions with canaries off).
 */

export interface CollusionRun {
  readonly forwarding: 'relay' | 'chain'
  readonly scores: CollusionScores
  readonly sessions: number
  /** Decoy steps per real step, as the peers saw them. */
  readonly canaryStepsPerRealStep: number
  /** Decode ms per generated token with canaries, and with none over the same sessions. */
  readonly msPerToken: number
  readonly msPerTokenNoCanaries: number
}

const FAST = ['--kernels', 'reference', '--announce-interval', '300', '--log-level', 'trace']
const PROMPT = 'Once upon a time'

async function generateSessions(
  nodes: readonly LocalNode[],
  o: { model: string; forwarding: 'relay' | 'chain'; steps: number; maxTokens: number; rate?: number; seed: number },
  events: Array<Record<string, unknown>>
): Promise<{ sessions: number; ms: number; tokens: number }> {
  const client = await createClient({
    bootstrap: nodes.map((n) => n.addrs[0]),
    model: o.model,
    kernels: createReferenceKernels(),
    forwarding: o.forwarding,
    speculate: 'off',
    ...(o.rate === undefined ? {} : { canaries: { rate: o.rate, seed: o.seed } }),
    log: (e) => events.push(e)
  })
  let sessions = 0
  let tokens = 0
  let ms = 0
  try {
    await client.view.waitForRoute(1, 4, 30_000)
    while (tokens < o.steps) {
      const t0 = performance.now()
      const r = await client.generate(PROMPT, { maxTokens: o.maxTokens, temperature: 0 })
      ms += performance.now() - t0
      tokens += r.tokens.length
      sessions++
    }
  } finally {
    await client.close()
  }
  return { sessions, ms, tokens }
}

/** One forwarding mode: sessions with canaries, then the same without; the peers' logs scored. */
export async function runCollusion(o: {
  model: string
  forwarding: 'relay' | 'chain'
  steps: number
  maxTokens: number
  rate: number
  seed: number
  /** Write the steps the peers saw here (JSON), to look at them. */
  dump?: string
  /** Also run the sessions with canaries off, for the overhead (default true). */
  baseline?: boolean
}): Promise<CollusionRun & { readonly seen: readonly SeenStep[] }> {
  const a = await startLocalNode({ model: o.model, layers: '1:2', args: FAST })
  const nodes = [a]
  try {
    nodes.push(await startLocalNode({ model: o.model, layers: '2:4', bootstrap: [a.addrs[0]], args: FAST }))
    const events: Array<Record<string, unknown>> = []
    const withCanaries = await generateSessions(nodes, o, events)
    const realIds = new Set(
      events
        .filter((e) => e.event === 'route')
        .flatMap((e) => (e.hopSessionIds as string[] | undefined) ?? [e.hopSessionId as string])
    )
    const seen: SeenStep[] = nodes.flatMap((n, i) => stepsSeen(`peer${i}`, n.logs, realIds))
    const scores = scoreCollusion(seen)
    if (o.dump) writeFileSync(o.dump, JSON.stringify(seen))
    const plain = o.baseline === false ? undefined : await generateSessions(nodes, { ...o, rate: undefined }, [])
    return {
      seen,
      forwarding: o.forwarding,
      scores,
      sessions: withCanaries.sessions,
      canaryStepsPerRealStep: scores.decoySteps / Math.max(1, scores.realSteps),
      msPerToken: withCanaries.ms / withCanaries.tokens,
      msPerTokenNoCanaries: plain ? plain.ms / plain.tokens : Number.NaN
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()))
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, COLLUSION_DEFAULTS)
  const { forwardings, ...o } = collusionOptions(a)
  const dump = a.string('dump')
  const runs: CollusionRun[] = []
  for (const forwarding of forwardings) {
    const { seen: _, ...run } = await runCollusion({ ...o, forwarding, ...(dump ? { dump: `${dump}.${forwarding}.json` } : {}) })
    runs.push(run)
  }
  const worst = (k: 'ids' | 'timing' | 'sizes' | 'order') => Math.max(...runs.map((r) => r.scores[k]))
  console.log(
    JSON.stringify(
      {
        bench: 'collusion',
        ...o,
        runs,
        bestAccuracy: { ids: worst('ids'), timing: worst('timing'), sizes: worst('sizes'), order: worst('order') },
        bound: 0.6,
        within: ['ids', 'timing', 'sizes'].every((k) => worst(k as 'ids') <= 0.6)
      },
      null,
      2
    )
  )
}
