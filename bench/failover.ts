/**
 * Time to resume after the serving peer dies (issue 6 part 6): `npm run bench -- failover
 * [--model FILE|SHAPE] [--prefixes 64,256,1024] [--kernels auto|reference|wasm|native]
 * [--dtype f32|f16|q8_0] [--seed N] [--client-mbps N] [--modes ...]`.
 *
 * Two node processes serve the remote blocks [1, n-1). For each prefix P and each way to rebuild
 * the KV (full `replay` of the inputs; `snapshot`: the client kept a sealed snapshot at P, which
 * the new peer imports; `standby`: the other peer was fed that snapshot as a standby and takes
 * over with the KV in place), a RemotePipeline prefills P random rows and runs one decode row;
 * then the serving peer is killed (SIGKILL) and the next decode row is timed: death detection,
 * new route, session open, KV restore (import, replay, or the one row after the standby's last
 * delta) and the step itself. A fresh peer replaces the killed one before the next measurement. A SHAPE (110m, ...) writes a random-weight GGUF with a context of
 * max(prefixes) + 16 to /tmp once. Prints one JSON object. Seal/open MB/s: `npm run bench -- seal`.
 *
 * Issue #41: `--client-mbps N` paces what the client sends at N Mbit/s (protocol/link-delay.ts;
 * the peers' links are not paced), `--modes` picks the ways to rebuild: `replay`, `snapshot`
 * (client-kept), `standby` (fed through the client), `standby-node` (fed node to node under the
 * client's grants), `holder-node` (no standby: a holder peer serving block 0 only keeps the
 * live hop's sealed deltas, fed node to node, and forwards them to the fresh replacement under a
 * fresh grant; client/recovery/holders.ts). Each result counts the sealed KV bytes that crossed the client's link
 * (received, sent) and the activation bytes it re-sent to replay.
 */

import { generateKeyPair } from '@libp2p/crypto/keys'
import { SwarmView } from '../client/routing/swarm-view.js'
import { RemotePipeline } from '../client/session/remote-pipeline.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { defaultModelPath } from '../node/paths.js'
import { createHost } from '../protocol/index.js'
import { computeModelId, openModelFile } from '../shards/index.js'
import { benchArgs, KERNEL_KINDS, TENSOR_DTYPES } from './options.js'
import { resolveModel } from './swarm-setup.js'

const MODES = ['replay', 'snapshot', 'standby', 'standby-node', 'holder-node'] as const
type Mode = (typeof MODES)[number]

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, {
    model: undefined,
    prefixes: '64,256,1024',
    kernels: 'auto',
    dtype: 'f32',
    seed: '1',
    'client-mbps': '0',
    modes: 'replay,snapshot,standby,standby-node,holder-node'
  })
  const prefixes = a.intList('prefixes', 1)
  const clientMbps = a.number('client-mbps', 0, false)
  const modes = (a.string('modes') ?? '').split(',').filter(Boolean)
  for (const m of modes) if (!MODES.includes(m as Mode)) a.fail(`--modes: ${m} is none of ${MODES.join(', ')}`)
  const kernels = a.oneOf('kernels', KERNEL_KINDS)
  const { path } = resolveModel(
    {
      model: a.string('model') ?? defaultModelPath(),
      dtype: a.oneOf('dtype', TENSOR_DTYPES),
      seed: a.int('seed', 0),
      seqLen: Math.max(...prefixes) + 16
    },
    'failover'
  )
  const model = openModelFile(path)
  const { nLayers, dim, seqLen } = model.config
  const modelId = computeModelId(model)
  model.close()
  const usable = prefixes.filter((p) => p + 2 <= seqLen)
  const skipped = prefixes.filter((p) => p + 2 > seqLen)
  const [from, to] = [1, nLayers - 1]
  const nodeArgs = ['--kernels', kernels, '--announce-interval', '300']
  const start = (bootstrap?: string[]) =>
    startLocalNode({ model: path, layers: `${from}:${to}`, bootstrap, args: nodeArgs, startTimeoutMs: 600_000 })
  const nodes: LocalNode[] = [await start()]
  nodes.push(await start([nodes[0].addrs[0]]))
  // holder-node: a peer that never serves the remote span (block 0 only) keeps its sealed KV
  const holder = modes.includes('holder-node')
    ? await startLocalNode({
        model: path,
        layers: '0:1',
        bootstrap: [nodes[0].addrs[0]],
        args: nodeArgs,
        startTimeoutMs: 600_000
      })
    : undefined
  const privateKey = await generateKeyPair('Ed25519')
  const linkDelay = clientMbps > 0 ? { oneWayMs: 0, megabitsPerSecond: clientMbps } : undefined
  const host = await createHost({ listen: [], bootstrap: nodes.map((n) => n.addrs[0]), privateKey, linkDelay })
  const results: Array<Record<string, unknown>> = []
  let seq = 0
  try {
    for (const prefix of usable) {
      for (const mode of modes as Mode[]) {
        // a view per measurement, bootstrapped to the live peers (the killed one is gone)
        const stopView = new AbortController()
        const view = new SwarmView(
          host,
          modelId,
          nodes.map((n) => n.addrs[0]),
          stopView.signal
        )
        const events: Array<Record<string, unknown>> = []
        const pipeline = new RemotePipeline({
          host,
          view,
          modelId,
          dim,
          from,
          to,
          sessionId: `bench-failover-${++seq}`,
          maxLength: prefix + 2,
          forwarding: 'relay',
          wireDtype: 'f32',
          stepTimeoutMs: 600_000,
          banMs: 3600_000,
          maxFailovers: 2,
          routeTimeoutMs: 60_000,
          snapshotEvery: mode === 'replay' ? 0 : prefix,
          standby: mode.startsWith('standby'),
          kvPath: mode.endsWith('-node') ? 'node' : 'client',
          privateKey,
          log: (e) => events.push({ ...e, at: performance.now() })
        })
        const rows = (n: number) => Float32Array.from({ length: n * dim }, (_, i) => Math.sin(i * 0.013 + n) * 0.5)
        await view.waitForRoute(from, to, 60_000)
        if (mode === 'holder-node') await view.waitForRoute(0, 1, 60_000) // the holder is in the view
        await pipeline.forward(rows(prefix), 0)
        await pipeline.forward(rows(1), prefix)
        const victim = nodes.find((n) => n.peerId === pipeline.route[0].peerId)
        if (!victim) throw new Error('the serving peer is not one of ours')
        victim.kill()
        await new Promise((r) => victim.process.once('exit', r))
        const t0 = performance.now()
        await pipeline.forward(rows(1), prefix + 1)
        const resumeMs = performance.now() - t0
        const end = performance.now()
        const after = events.filter((e) => (e.at as number) >= t0)
        const at = (name: string) => after.find((e) => e.event === name)?.at as number | undefined
        const restore = after.find((e) => e.event === 'restore')
        const replay = after.find((e) => e.event === 'replay')
        const resume = after.find((e) => e.event === 'resume')
        const [failedAt, routedAt, restoredAt] = [
          at('failover') ?? t0,
          at('route') ?? t0,
          ((restore ?? (mode.startsWith('standby') ? resume : undefined))?.at as number | undefined) ?? end
        ]
        const ms = (x: number) => Math.round(x * 10) / 10
        await pipeline.close() // logs the sealed KV bytes that crossed the client's link
        const kv = events.find((e) => e.event === 'kv-client-bytes') ?? {}
        const replayedRows = (resume?.replayedRows ?? replay?.positions ?? 0) as number
        const fed = events.filter((e) => e.event === 'standby-fed' && (e.at as number) < t0)
        const held = events.filter((e) => e.event === 'holder-fed' && (e.at as number) < t0)
        results.push({
          prefix,
          mode,
          resumeMs: Math.round(resumeMs * 10) / 10,
          resumedFrom: resume?.from,
          restoredPositions: resume?.restoredPositions ?? 0,
          replayedRows,
          clientKvBytes: { received: kv.received ?? 0, sent: kv.sent ?? 0 },
          clientReplayBytes: replayedRows * dim * 4,
          ...(fed.length > 0 ? { standbyFeedMs: ms(fed.reduce((x, e) => x + (e.ms as number), 0)) } : {}),
          ...(held.length > 0 ? { holderFeedMs: ms(held.reduce((x, e) => x + (e.ms as number), 0)) } : {}),
          // until the dead hop is noticed, until the new route's sessions are open, until its KV
          // is restored (snapshot mode: the import; replay mode: the whole replay and the step)
          phasesMs: {
            detect: ms(failedAt - t0),
            route: ms(routedAt - failedAt),
            restore: ms(restoredAt - routedAt),
            rest: ms(end - restoredAt)
          }
        })
        process.stderr.write(`bench failover: prefix ${prefix} ${mode}: ${resumeMs.toFixed(1)} ms\n`)
        stopView.abort()
        nodes.splice(nodes.indexOf(victim), 1)
        // the holder too: it must reach the replacement to forward to it (the first node, its only
        // bootstrap peer, may be gone; a real swarm's gossip mesh is wider)
        nodes.push(await start([...nodes, ...(holder ? [holder] : [])].map((n) => n.addrs[0])))
      }
    }
  } finally {
    await host.stop()
    await Promise.all([...nodes, ...(holder ? [holder] : [])].map((n) => n.stop()))
  }
  // resume by replay ÷ resume by snapshot (by standby), per prefix; node-to-node vs client-kept (issue #41)
  const speedup: Record<string, number> = {}
  const standbySpeedup: Record<string, number> = {}
  const nodeVsClientKept: Record<string, number> = {}
  const holderVsClientKept: Record<string, number> = {}
  const ratio = (x: number | undefined, y: number | undefined) => (x && y ? Math.round((x / y) * 100) / 100 : undefined)
  for (const p of usable) {
    const ms = (mode: string) => results.find((x) => x.prefix === p && x.mode === mode)?.resumeMs as number | undefined
    const put = (r: Record<string, number>, v: number | undefined) => v !== undefined && (r[p] = v)
    put(speedup, ratio(ms('replay'), ms('snapshot')))
    put(standbySpeedup, ratio(ms('replay'), ms('standby')))
    put(nodeVsClientKept, ratio(ms('snapshot'), ms('standby-node')))
    put(holderVsClientKept, ratio(ms('snapshot'), ms('holder-node')))
  }
  console.log(
    JSON.stringify(
      {
        model: path,
        nLayers,
        dim,
        seqLen,
        remote: [from, to],
        results,
        clientMbps,
        speedup,
        standbySpeedup,
        nodeVsClientKept,
        holderVsClientKept,
        ...(skipped.length ? { skipped } : {})
      },
      null,
      2
    )
  )
}
