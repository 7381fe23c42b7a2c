/**
 * What canaries cost a real swarm's decode: `npm run bench -- swarm-canary --model FILE|SHAPE
 * [--peers 3] [--forwarding chain|relay] [--gen-tokens 256] [--rounds 5] [--threads N]
 * [--audit-every K] [--clients all|trusted] [--warmup-rounds 2]` (K: real chained steps per audit round,
 * client/verification/audit-batch.ts; `trusted`: only the first two clients below, for more rounds).
 *
 * Starts N real node processes on 127.0.0.1 (as `bench swarm`) and measures, in interleaved
 * rounds on the same warm nodes, decode tokens/s of greedy generations from:
 *  - `off`: a long-lived client with canaries off;
 *  - `trusted`: a long-lived client with canaries at the default rate, its peers past start-up
 *    (warmed with one generation first), as a client that keeps running sees them;
 *  - `newClient`: a new client with default canaries each round, so its start-up burst against
 *    every peer (new peers get more canaries, canary/adaptive-rate.ts) falls in the measured
 *    generation; its canary set is built before the clock starts (a client does that once);
 *  - `returningClient`: a new client each round too, with a trust file (`canaries.trustFile`)
 *    an earlier one wrote, as `layerswarm generate --trust-file` runs one after another.
 * The cost is 1 − (rate with canaries / rate without) per round, the median reported: the
 * issue's target is under 5 % of decode throughput at the default rate. Beside it, the CPU cost:
 * CPU time of the client and the nodes per token, with canaries ÷ without − 1 (the extra work;
 * less moved by other load than the rate). Prints one JSON object.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type LayerswarmClient as Client, createClient, type Forwarding } from '../client/index.js'
import { DEFAULT_AUDIT_EVERY } from '../client/verification/audit-batch.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { openModelFile, selectKernelsFor } from '../shards/index.js'
import { benchArgs, FORWARDINGS } from './options.js'
import { evenSpans, promptText, resolveModel } from './swarm-setup.js'
import { decodeRate } from './swarm-single.js'
import { median, round, swarmCpuMs } from './swarm-stats.js'

interface Options {
  readonly model: string
  readonly peers: number
  readonly forwarding: Forwarding
  readonly genTokens: number
  readonly rounds: number
  readonly threads: number
  /** Real chained steps per audit round of the canary clients (client/verification/audit-batch.ts); default theirs. */
  readonly auditEvery?: number
  /** `trusted`: only the off and trusted clients (shorter rounds, so more of them). */
  readonly clients: 'all' | 'trusted'
  /** Rounds run first and not counted: the trusted client's canaries grow in slices meanwhile. */
  readonly warmupRounds: number
}

async function decode(client: Client, prompt: string, maxTokens: number, pids: readonly (number | undefined)[] = []) {
  const times: number[] = []
  const cpu0 = swarmCpuMs(pids)
  const t0 = performance.now()
  const it = client.stream(prompt, { maxTokens, temperature: 0 })
  let r = await it.next()
  while (!r.done) {
    times.push(performance.now())
    r = await it.next()
  }
  const sent = r.value.report.canaries.reduce((n: number, p: { canariesSent: number }) => n + p.canariesSent, 0)
  const cpuMsPerToken = (swarmCpuMs(pids) - cpu0) / Math.max(1, times.length)
  return {
    rate: decodeRate(times),
    // the wait for the first token (a canary set built at once falls here, not in the rate)
    firstTokenMs: (times[0] ?? Number.NaN) - t0,
    cpuMsPerToken,
    tokens: r.value.tokens,
    canariesSent: sent,
    excluded: r.value.report.excludedPeers.length
  }
}

export async function runSwarmCanaryBench(o: Options): Promise<Record<string, unknown>> {
  const { path } = resolveModel({ model: o.model, dtype: 'q8_0', seed: 1 })
  const model = openModelFile(path)
  const c = model.config
  const prompt = promptText(model, 16)
  // the kernels the model's shape calls for (a tiny model's dims do not fit the fast paths' tiles)
  const kernels = selectKernelsFor(c, { threads: o.threads })
  model.close()
  const maxTokens = Math.min(o.genTokens, c.seqLen - 17)
  const spans = evenSpans(1, c.nLayers - 1, o.peers)
  const nodes: LocalNode[] = []
  const clients: Client[] = []
  const trustDir = mkdtempSync(join(tmpdir(), 'layerswarm-bench-trust-'))
  const trustFile = join(trustDir, 'trust.json')
  const open = async (canaries: boolean, trust = false): Promise<Client> => {
    const client = await createClient({
      bootstrap: nodes.map((n) => n.addrs[0]),
      model: path,
      forwarding: o.forwarding,
      kernels,
      routeTimeoutMs: 60_000,
      stepTimeoutMs: 120_000,
      ...(canaries
        ? { canaries: { ...(trust ? { trustFile } : {}), ...(o.auditEvery ? { auditEvery: o.auditEvery } : {}) } }
        : { canaries: false as const })
    })
    clients.push(client)
    return client
  }
  try {
    const args = ['--threads', String(o.threads)]
    nodes.push(await startLocalNode({ model: path, layers: `${spans[0][0]}:${spans[0][1]}`, args, startTimeoutMs: 600_000 }))
    for (const [a, b] of spans.slice(1))
      nodes.push(
        await startLocalNode({ model: path, layers: `${a}:${b}`, bootstrap: [nodes[0].addrs[0]], args, startTimeoutMs: 600_000 })
      )
    const off = await open(false)
    const trusted = await open(true)
    // JIT on every side, routes, and the trusted client's start-up burst
    await decode(off, prompt, maxTokens)
    await decode(trusted, prompt, maxTokens)
    const all = o.clients === 'all'
    // the first client to write the trust file pays the start-up burst, unmeasured
    if (all) {
      const writer = await open(true, true)
      await decode(writer, prompt, maxTokens)
      await writer.close()
      clients.splice(clients.indexOf(writer), 1)
    }
    const rounds: Array<Record<string, number>> = []
    let sameTokens = true
    for (let r = -o.warmupRounds; r < o.rounds; r++) {
      const pids = nodes.map((x) => x.process.pid)
      if (r < 0) {
        // its start-up burst grew the trusted client's secret set, built in slices between steps
        await decode(off, prompt, maxTokens)
        await decode(trusted, prompt, maxTokens)
        continue
      }
      if (!all) {
        const a = await decode(off, prompt, maxTokens, pids)
        const t = await decode(trusted, prompt, maxTokens, pids)
        sameTokens &&= t.tokens.join() === a.tokens.join()
        rounds.push({
          off: round(a.rate, 2),
          trusted: round(t.rate, 2),
          offCpuMs: round(a.cpuMsPerToken, 2),
          trustedCpuMs: round(t.cpuMsPerToken, 2),
          trustedCanaries: t.canariesSent,
          excluded: t.excluded
        })
        continue
      }
      const fresh = await open(true)
      const returning = await open(true, true)
      // each builds its canary set (once per client) before the clock starts
      await decode(fresh, prompt, 2)
      await decode(returning, prompt, 2)
      const a = await decode(off, prompt, maxTokens, pids)
      const t = await decode(trusted, prompt, maxTokens, pids)
      const n = await decode(fresh, prompt, maxTokens, pids)
      // closed now: its canaries, still growing in slices after its burst, would share this
      // process's event loop with the next client's generation (one client a process, as users run)
      await fresh.close()
      clients.splice(clients.indexOf(fresh), 1)
      const b = await decode(returning, prompt, maxTokens, pids)
      sameTokens &&= [t, n, b].every((x) => x.tokens.join() === a.tokens.join())
      rounds.push({
        off: round(a.rate, 2),
        trusted: round(t.rate, 2),
        newClient: round(n.rate, 2),
        returningClient: round(b.rate, 2),
        // CPU of the client process and every node per generated token (all threads)
        offCpuMs: round(a.cpuMsPerToken, 2),
        trustedCpuMs: round(t.cpuMsPerToken, 2),
        newClientCpuMs: round(n.cpuMsPerToken, 2),
        returningClientCpuMs: round(b.cpuMsPerToken, 2),
        offFirstTokenMs: round(a.firstTokenMs, 0),
        newClientFirstTokenMs: round(n.firstTokenMs, 0),
        returningClientFirstTokenMs: round(b.firstTokenMs, 0),
        trustedCanaries: t.canariesSent,
        newClientCanaries: n.canariesSent,
        returningClientCanaries: b.canariesSent,
        excluded: t.excluded + n.excluded + b.excluded
      })
      await returning.close()
      clients.splice(clients.indexOf(returning), 1)
    }
    type Kind = 'trusted' | 'newClient' | 'returningClient'
    const kinds: Kind[] = all ? ['trusted', 'newClient', 'returningClient'] : ['trusted']
    const each = <T>(f: (k: Kind) => T) => Object.fromEntries(kinds.map((k) => [k, f(k)]))
    return {
      bench: 'swarm-canary',
      model: path,
      config: { dim: c.dim, layers: c.nLayers },
      peers: o.peers,
      spans,
      forwarding: o.forwarding,
      genTokens: maxTokens,
      warmupRounds: o.warmupRounds,
      threads: o.threads,
      auditEvery: o.auditEvery ?? DEFAULT_AUDIT_EVERY,
      decodeTokensPerSecond: {
        off: round(median(rounds.map((x) => x.off)), 2),
        ...each((k) => round(median(rounds.map((x) => x[k])), 2))
      },
      // 1 − rate with canaries / rate without, median over interleaved rounds
      canaryCost: { ...each((k) => round(median(rounds.map((x) => 1 - x[k] / x.off)))), target: 0.05 },
      // CPU per token (client and nodes, all threads) with canaries ÷ without − 1, median over
      // rounds: the extra work, which a shared host's load moves less than the rate
      canaryCpuCost: each((k) => round(median(rounds.map((x) => x[`${k}CpuMs`] / x.offCpuMs - 1)))),
      sameTokens,
      rounds
    }
  } finally {
    await Promise.all(clients.map((x) => x.close()))
    rmSync(trustDir, { recursive: true, force: true })
    kernels.close?.()
    await Promise.all(nodes.map((n) => n.stop()))
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, {
    model: undefined,
    peers: '3',
    forwarding: 'chain',
    'gen-tokens': '256',
    rounds: '5',
    threads: undefined,
    'audit-every': undefined,
    clients: 'all',
    'warmup-rounds': '2'
  })
  const result = await runSwarmCanaryBench({
    model: a.required('model', 'FILE or a shape (110m, 1.1b, ...)'),
    peers: a.int('peers', 1),
    forwarding: a.oneOf('forwarding', FORWARDINGS),
    genTokens: a.int('gen-tokens', 2),
    rounds: a.int('rounds', 1),
    threads: a.threads(),
    auditEvery: a.optional('audit-every', 1),
    clients: a.oneOf('clients', ['all', 'trusted'] as const),
    warmupRounds: a.int('warmup-rounds', 0)
  })
  console.log(JSON.stringify(result, null, 2))
}
