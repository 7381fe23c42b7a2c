import { DEFAULT_DECOYS_IN_FLIGHT } from '../canary/options.js'
import { createClient, type LayerswarmClient } from '../client/index.js'
import { startLocalNode } from '../node/cli/local-swarm.js'
import { defaultModelPath } from '../node/paths.js'
import { benchArgs } from './options.js'

/**
 * `npm run bench -- verified-stream [--tokens N] [--rounds R] [--in-flight K]`: what verifiedStream costs. On a
 * real 2-peer swarm (separate node processes, the bundled model unless --model), per token the
 * time from its logits (onLogits: the step that made it is done) to the stream handing it out,
 * in ms and in steps (the median time between tokens), for a fresh client (its peers still in
 * their canary start-up burst) and the same client again (its peers cleared), with and without
 * verifiedStream. --in-flight sets the decoys a peer below the evidence threshold gets at once
 * (canary/adaptive-rate.ts, default 4; 1 is the one-canary-per-real-step burst of before).
 */
async function holdOf(client: LayerswarmClient, tokens: number, verifiedStream: boolean) {
  const made: number[] = []
  const shown: number[] = []
  const it = client.stream('Once upon a time', {
    maxTokens: tokens,
    temperature: 0,
    verifiedStream,
    onLogits: () => made.push(performance.now())
  })
  let r = await it.next()
  while (!r.done) {
    if (r.value.type === 'token') shown.push(performance.now())
    r = await it.next()
  }
  const n = Math.min(made.length, shown.length)
  const gaps = made
    .slice(1, n)
    .map((t, i) => t - made[i])
    .sort((a, b) => a - b)
  const stepMs = gaps[Math.floor(gaps.length / 2)] ?? 0
  let hold = 0
  for (let i = 0; i < n; i++) hold += shown[i] - made[i]
  const holdMs = n > 0 ? hold / n : 0
  return {
    tokens: n,
    // the start-up wait: real steps made before the first token was handed out, and the first
    // token's hold in median steps (the burst's decoy steps slow the real ones meanwhile)
    stepsBeforeFirstShown: shown.length > 0 ? made.filter((t) => t <= shown[0]).length : 0,
    firstHoldSteps: n > 0 && stepMs > 0 ? round((shown[0] - made[0]) / stepMs) : 0,
    medianStepMs: round(stepMs),
    meanHoldMs: round(holdMs),
    meanHoldSteps: stepMs > 0 ? round(holdMs / stepMs) : 0
  }
}

const round = (x: number): number => Math.round(x * 100) / 100

export async function main(argv: string[]): Promise<void> {
  const args = benchArgs(argv, { model: undefined, tokens: '128', rounds: '3', 'in-flight': undefined })
  const model = args.string('model') ?? defaultModelPath()
  const tokens = args.int('tokens', 2)
  const rounds = args.int('rounds', 1)
  const inFlight = args.optional('in-flight', 1)
  const a = await startLocalNode({ model, layers: '1:3', args: ['--announce-interval', '300'] })
  const b = await startLocalNode({ model, layers: '3:4', bootstrap: [a.addrs[0]], args: ['--announce-interval', '300'] })
  const runs: Array<Record<string, unknown>> = []
  try {
    for (let i = 0; i < rounds; i++) {
      const client = await createClient({
        bootstrap: [a.addrs[0], b.addrs[0]],
        model,
        forwarding: 'relay',
        ...(inFlight === undefined ? {} : { canaries: { adaptive: { inFlight } } })
      })
      try {
        await client.view.waitForRoute(1, 4, 20_000)
        runs.push({ client: 'fresh', verifiedStream: true, ...(await holdOf(client, tokens, true)) })
        runs.push({ client: 'cleared', verifiedStream: true, ...(await holdOf(client, tokens, true)) })
        runs.push({ client: 'cleared', verifiedStream: false, ...(await holdOf(client, tokens, false)) })
      } finally {
        await client.close()
      }
    }
  } finally {
    await Promise.all([a.stop(), b.stop()])
  }
  const mean = (client: string, vs: boolean) => {
    const r = runs.filter((x) => x.client === client && x.verifiedStream === vs)
    return round(r.reduce((s, x) => s + (x.meanHoldSteps as number), 0) / r.length)
  }
  console.log(
    JSON.stringify(
      {
        model,
        tokens,
        inFlight: inFlight ?? `default (${DEFAULT_DECOYS_IN_FLIGHT})`,
        meanHoldSteps: { fresh: mean('fresh', true), cleared: mean('cleared', true), off: mean('cleared', false) },
        target: '< 1 step per token at the default rate',
        runs
      },
      null,
      2
    )
  )
}
