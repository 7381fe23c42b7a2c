import type { BlockPipeline, Shard } from '../../shards/index.js'
import type { RemotePipeline } from './remote-pipeline.js'

/** Local blocks, then the remote span, then local blocks: one session's whole model. */
export function composePipeline(
  first: Shard | undefined,
  remote: RemotePipeline,
  last: Shard | undefined,
  sessionId: string,
  maxLength: number
): BlockPipeline {
  for (const s of [first, last]) s?.openSession(sessionId, { maxLength })
  return {
    async forward(hidden, startPos, options) {
      let h = first ? first.forward(sessionId, hidden, startPos) : hidden
      // the peers compute next: free the cores this client's kernel threads would spin on
      first?.rest()
      last?.rest()
      h = await remote.forward(h, startPos, options)
      return last ? last.forward(sessionId, h, startPos) : h
    },
    async close() {
      for (const s of [first, last]) s?.closeSession(sessionId)
      await remote.close()
    }
  }
}

/** The pipeline, and the peers of the route that ran its last step (whom a rollback names). */
export function trackLastStepPeers(
  pipeline: BlockPipeline,
  remote: RemotePipeline
): { pipeline: BlockPipeline; lastStepPeers: () => readonly string[] } {
  let peers: readonly string[] = []
  return {
    pipeline: {
      async forward(hidden, startPos, signal) {
        const out = await pipeline.forward(hidden, startPos, signal)
        peers = remote.route.map((h) => h.peerId)
        return out
      },
      close: () => pipeline.close()
    },
    lastStepPeers: () => peers
  }
}
