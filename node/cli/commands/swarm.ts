import type { Command } from 'commander'
import { type PeerRecord, parseBootstrapList, SwarmView } from '../../../client/index.js'
import { createHost, reachabilityOf } from '../../../protocol/index.js'
import { computeModelId, openModelFile } from '../../../shards/index.js'
import { warn } from '../cli-exit.js'
import { int } from '../options.js'
import { resolveModelArgument } from './checks.js'

/** `node start`'s default --announce-interval: gossip alone needs about this long to hear every peer. */
const DEFAULT_ANNOUNCE_INTERVAL_MS = 5_000

interface ModelCoverage {
  modelId: string
  /** Readable, from the peers' GGUF metadata (issue 33 item 5); absent from older peers. */
  name?: string
  nLayers: number
  covered: number[]
  gaps: number[]
}

function coverage(modelId: string, list: PeerRecord[]): ModelCoverage {
  const nLayers = Math.max(...list.map((p) => p.nLayers || p.end))
  const covered: number[] = []
  const gaps: number[] = []
  for (let b = 0; b < nLayers; b++) (list.some((p) => b >= p.start && b < p.end) ? covered : gaps).push(b)
  const name = list.find((p) => p.modelName)?.modelName
  return { modelId, ...(name ? { name } : {}), nLayers, covered, gaps }
}

export function registerSwarm(program: Command): void {
  program
    .command('swarm')
    .description(
      'Show who serves which blocks of which model: asks the bootstrap peers for the announcements they hold, listens to gossip for --wait ms, and checks every peer with an info request.'
    )
    .requiredOption('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of swarm peers')
    .option('--model <path>', 'only peers serving this model file')
    .option(
      '--wait <ms>',
      `also listen to gossip this long (peers announce every ${DEFAULT_ANNOUNCE_INTERVAL_MS} ms by default; the view says when it may be partial)`,
      int('--wait', 0),
      1500
    )
    .option('--json', 'print JSON: {peers, models, partial, notes, stats}', false)
    .action(async (opts) => {
      const bootstrap = parseBootstrapList(String(opts.bootstrap))
      let modelId: string | undefined
      if (opts.model) {
        const m = openModelFile(await resolveModelArgument(opts.model, '--model'))
        modelId = computeModelId(m)
        m.close()
      }
      const host = await createHost({ listen: [], bootstrap })
      try {
        const view = new SwarmView(host, modelId, bootstrap)
        const t0 = Date.now()
        await view.refresh()
        const first = view.lastRefresh
        // every bootstrap address failed: nothing to show, and the address is what to fix
        if (first.bootstrapFailed.length === bootstrap.length) throw first.bootstrapFailed[0]
        for (const f of first.bootstrapFailed) warn(f)
        await new Promise((r) => setTimeout(r, opts.wait))
        await view.refresh()
        const waitedMs = Date.now() - t0
        const last = view.lastRefresh
        // how this command reached each peer: direct, relayed or hole-punched (protocol/reachability.ts)
        const peers = view.list().map((p) => ({ ...p, reachability: reachabilityOf(host, p.peerId) ?? 'unreached' }))
        const notes: string[] = []
        const held = last.bootstrapAnnouncements.filter((b) => b.announcements >= 0)
        if (first.bootstrapFailed.length > 0) notes.push(`${first.bootstrapFailed.length} bootstrap address(es) failed`)
        if (held.length < last.bootstrapAnnouncements.length && opts.wait < DEFAULT_ANNOUNCE_INTERVAL_MS)
          notes.push(
            `a bootstrap peer did not hand over its announcements, so this is what gossip brought in ${waitedMs} ms; ` +
              `peers announce every ${DEFAULT_ANNOUNCE_INTERVAL_MS} ms by default (--wait ${DEFAULT_ANNOUNCE_INTERVAL_MS + 1000} for a full view)`
          )
        const silent = last.dialled.filter((d) => !d.ok).map((d) => d.peerId)
        if (silent.length > 0) notes.push(`${silent.length} announced peer(s) did not answer: ${silent.join(', ')}`)
        const byModel = new Map<string, Array<PeerRecord & { reachability: string }>>()
        for (const p of peers) byModel.set(p.modelId, [...(byModel.get(p.modelId) ?? []), p])
        const models = [...byModel].map(([id, list]) => coverage(id, list))
        const partial = notes.length > 0
        if (opts.json) {
          const stats = {
            peers: peers.length,
            models: models.length,
            bootstrapPeers: last.bootstrapAnnouncements.length,
            bootstrapFailed: first.bootstrapFailed.length,
            announcementsHeld: held.reduce((n, b) => n + b.announcements, 0),
            waitedMs
          }
          process.stdout.write(`${JSON.stringify({ peers, models, partial, notes, stats })}\n`)
          return
        }
        if (peers.length === 0) process.stdout.write('no peers answered\n')
        for (const m of models) {
          const list = byModel.get(m.modelId) ?? []
          process.stdout.write(`model ${m.modelId} (${m.nLayers} blocks)${m.name ? `  ${m.name}` : ''}\n`)
          for (const p of list) {
            const bar = Array.from({ length: m.nLayers }, (_, b) => (b >= p.start && b < p.end ? '█' : '·')).join('')
            process.stdout.write(
              `  ${bar}  [${p.start}, ${p.end})  ${p.peerId}  ${p.throughput} tok/s  rtt ${p.rttMs.toFixed(1)} ms  ${p.reachability}  free KV ${p.freeCacheTokens}\n`
            )
          }
          process.stdout.write(
            m.gaps.length
              ? `  ${m.covered.length} of ${m.nLayers} blocks served; gaps: blocks ${m.gaps.join(', ')} (a client runs its --edge-first/--edge-last blocks itself)\n`
              : `  all ${m.nLayers} blocks served (0..${m.nLayers - 1})\n`
          )
        }
        for (const n of notes) process.stdout.write(`partial view: ${n}\n`)
      } finally {
        await host.stop()
      }
    })
}
