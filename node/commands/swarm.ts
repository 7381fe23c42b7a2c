import type { Command } from 'commander'
import { SwarmView } from '../../client/index.js'
import { createHost } from '../../protocol/index.js'
import { computeModelId, openModelFile } from '../../shards/index.js'
import { int } from './options.js'

export function registerSwarm(program: Command): void {
  program
    .command('swarm')
    .description('Show who serves which blocks of which model.')
    .requiredOption('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of swarm peers')
    .option('--model <path>', 'only peers serving this model file')
    .option('--wait <ms>', 'listen for announcements this long before printing', int('--wait', 0), 1500)
    .option('--json', 'print JSON', false)
    .action(async (opts) => {
      const bootstrap = String(opts.bootstrap).split(',').filter(Boolean)
      let modelId: string | undefined
      if (opts.model) {
        const m = openModelFile(opts.model)
        modelId = computeModelId(m)
        m.close()
      }
      const host = await createHost({ listen: [], bootstrap })
      try {
        const view = new SwarmView(host, modelId, bootstrap)
        await view.refresh()
        await new Promise((r) => setTimeout(r, opts.wait))
        await view.refresh()
        const peers = view.list()
        if (opts.json) {
          process.stdout.write(`${JSON.stringify({ peers })}\n`)
          return
        }
        const byModel = new Map<string, typeof peers>()
        for (const p of peers) byModel.set(p.modelId, [...(byModel.get(p.modelId) ?? []), p])
        if (peers.length === 0) process.stdout.write('no peers answered\n')
        for (const [id, list] of byModel) {
          const end = Math.max(...list.map((p) => p.end))
          process.stdout.write(`model ${id}\n`)
          for (const p of list) {
            const bar = Array.from({ length: end }, (_, b) => (b >= p.start && b < p.end ? '█' : '·')).join('')
            process.stdout.write(
              `  ${bar}  [${p.start}, ${p.end})  ${p.peerId}  ${p.throughput} tok/s  rtt ${p.rttMs.toFixed(1)} ms  free KV ${p.freeCacheTokens}\n`
            )
          }
          const covered = Array.from({ length: end }, (_, b) => list.some((p) => b >= p.start && b < p.end))
          const gaps = covered.flatMap((c, b) => (c ? [] : [b]))
          process.stdout.write(gaps.length ? `  gaps: blocks ${gaps.join(', ')}\n` : `  blocks 0..${end - 1} covered\n`)
        }
      } finally {
        await host.stop()
      }
    })
}
