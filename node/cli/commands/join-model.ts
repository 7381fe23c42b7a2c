import type { AbortOptions } from '@libp2p/interface'
import { multiaddr } from '@multiformats/multiaddr'
import {
  type Announcement,
  createHost,
  dialBootstrap,
  fetchAnnouncements,
  fetchInfo,
  type Host
} from '../../../protocol/index.js'
import { type ModelRank, type ModelSupply, rankModelsByDemand } from '../../daemon/index.js'
import { BadOptionError } from '../errors.js'

/*
 * Issue 33 item 3: `join --model-id auto` serves the model the swarm needs most. It reads the
 * announcements the bootstrap peers hold (every model's: each names the content id its peer
 * seeds and the demand it sees), asks one peer of each model for the model's block count, and
 * ranks the models by node/daemon/placement/model-demand.ts. Models announced without a content id (nodes
 * of llama2.c files, or older peers) cannot be fetched by id and are left out.
 */

const timeout = (signal: AbortSignal | undefined, ms: number): AbortSignal =>
  signal ? AbortSignal.any([signal, AbortSignal.timeout(ms)]) : AbortSignal.timeout(ms)

/** Every model the bootstrap peers know of that can be fetched by id, with its peers' spans and demand. */
export async function surveyModels(
  host: Host,
  bootstrap: readonly string[],
  { signal }: AbortOptions = {}
): Promise<ModelSupply[]> {
  const latest = new Map<string, Announcement>()
  for (const addr of bootstrap) {
    try {
      for (const { announcement: a } of await fetchAnnouncements(host, multiaddr(addr), { signal: timeout(signal, 5_000) })) {
        const prev = latest.get(a.peerId)
        if (!prev || prev.issuedAtMs < a.issuedAtMs) latest.set(a.peerId, a)
      }
    } catch {
      signal?.throwIfAborted()
    }
  }
  const byContent = new Map<string, Announcement[]>()
  for (const a of latest.values()) {
    if (a.contentId === undefined) continue
    byContent.set(a.contentId, [...(byContent.get(a.contentId) ?? []), a])
  }
  const out: ModelSupply[] = []
  for (const [contentId, anns] of byContent) {
    let nBlocks: number | undefined
    for (const a of anns) {
      try {
        const addrs = a.addrs.map((x) => multiaddr(x.includes('/p2p/') ? x : `${x}/p2p/${a.peerId}`))
        nBlocks = (await fetchInfo(host, addrs, { signal: timeout(signal, 5_000) })).info.nLayers
        break
      } catch {
        signal?.throwIfAborted()
      }
    }
    if (nBlocks === undefined) continue
    out.push({
      contentId,
      modelId: anns[0].modelId,
      nBlocks,
      peers: anns.map((a) => ({
        start: a.start,
        end: a.end,
        throughput: a.throughput,
        demandTokensPerMinute: a.demandTokensPerMinute ?? 0
      }))
    })
  }
  return out
}

/** `--model-id auto`: the content id of the model to serve, and the ranking it came from. */
export async function chooseModelByDemand(
  bootstrap: readonly string[],
  { signal }: AbortOptions = {}
): Promise<{ contentId: string; ranking: ModelRank[] }> {
  if (bootstrap.length === 0)
    throw new BadOptionError('--model-id auto picks among the models the swarm serves: give --bootstrap')
  const host = await createHost({ listen: [], pubsub: false })
  try {
    await dialBootstrap(host, [...bootstrap], { signal })
    const ranking = rankModelsByDemand(await surveyModels(host, bootstrap, { signal }))
    if (ranking.length === 0)
      throw new BadOptionError(
        '--model-id auto: no bootstrap peer knows a model announced with a content id (start a node with a GGUF file, or give the id)'
      )
    return { contentId: ranking[0].contentId, ranking }
  } finally {
    await host.stop()
  }
}
