import type { AbortOptions } from '@libp2p/interface'
import { multiaddr } from '@multiformats/multiaddr'
import { createHost, dialBootstrap, fetchInfo } from '../../../../protocol/index.js'
import type { ShardLike } from '../../../../shards/index.js'
import { chooseSpan } from '../../../daemon/index.js'

/* `node start`: which span a joining node serves, and the throughput it announces for it. */

/** Decode tokens/s of a loaded span, measured on a scratch session (announced for routing). */
export function measureThroughput(shard: ShardLike, dim: number, steps = 8): number {
  const id = '__throughput__'
  shard.openSession(id, { maxLength: steps + 1 })
  const x = new Float32Array(dim).fill(0.01)
  shard.forward(id, x, 0)
  const t0 = performance.now()
  for (let i = 1; i <= steps; i++) shard.forward(id, x, i)
  const ms = performance.now() - t0
  shard.closeSession(id)
  return Math.round((steps * 1000) / Math.max(ms, 1e-3))
}

/** Without --layers: look at what the bootstrap peers serve and pick the span Petals would. */
export async function pickSpan(
  nLayers: number,
  numBlocks: number,
  modelId: string,
  bootstrap: string[],
  { signal }: AbortOptions = {}
): Promise<[number, number]> {
  if (bootstrap.length === 0) return chooseSpan(nLayers, numBlocks, [])
  const host = await createHost({ listen: [], pubsub: false })
  try {
    await dialBootstrap(host, bootstrap, { signal })
    const spans = []
    for (const addr of bootstrap) {
      try {
        const { info } = await fetchInfo(host, multiaddr(addr), {
          signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(5_000)]) : AbortSignal.timeout(5_000)
        })
        if (info.modelId === modelId) spans.push({ start: info.start, end: info.end, throughput: info.throughput })
      } catch {}
    }
    return chooseSpan(nLayers, numBlocks, spans)
  } finally {
    await host.stop()
  }
}
