import { type Multiaddr, multiaddr } from '@multiformats/multiaddr'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createHost, type Host } from '../../protocol/index.js'
import {
  createEdge,
  createShard,
  type Kernels,
  type ModelFile,
  openModelFile,
  type Shard,
  selectKernels
} from '../../shards/index.js'
import { GGUF_PATH } from './reference.js'

/**
 * The set-up the session-protocol e2e tests share: one real node process serving blocks
 * [start, end) of stories260K on the reference kernels, `hosts` in-test libp2p hosts to talk to
 * it, and the same span in this process (`local`) to compute what the node must answer, with
 * `rows` the embeddings of `ids` as inputs.
 */
export interface SpanNode {
  readonly node: LocalNode
  readonly hosts: Host[]
  readonly model: ModelFile
  readonly kernels: Kernels
  readonly local: Shard
  readonly rows: Float32Array
  /** The node's listen addresses, to dial. */
  target(): Multiaddr[]
  /** Stops the hosts and the node, frees the in-process span. */
  close(): Promise<void>
}

export const SPAN: readonly [number, number] = [1, 4]

export async function startSpanNode(o: { hosts: number; ids: number[] }): Promise<SpanNode> {
  const [start, end] = SPAN
  const node = await startLocalNode({ model: GGUF_PATH, layers: `${start}:${end}`, args: ['--kernels', 'reference'] })
  const hosts = await Promise.all(Array.from({ length: o.hosts }, () => createHost({ listen: [], pubsub: false })))
  const model = openModelFile(GGUF_PATH)
  const kernels = selectKernels({ kind: 'reference' })
  const local = createShard({ model, start, end, kernels })
  const rows = createEdge({ model, kernels }).embed(o.ids)
  return {
    node,
    hosts,
    model,
    kernels,
    local,
    rows,
    target: () => node.addrs.map((a) => multiaddr(a)),
    close: async () => {
      await Promise.all(hosts.map((h) => h.stop()))
      await node.stop()
      kernels.close?.()
      model.close()
    }
  }
}
