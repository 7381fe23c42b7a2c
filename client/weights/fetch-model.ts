import { homedir } from 'node:os'
import { join } from 'node:path'
import type { AbortOptions, PeerId } from '@libp2p/interface'
import type { Host } from '../../protocol/index.js'
import {
  InvalidArgumentError,
  isContentModelId,
  type ModelConfig,
  type ModelFile,
  openStoredModel,
  type PieceWant,
  piecesFor,
  type WeightsStore
} from '../../shards/index.js'
import { type FetchOptions, type FetchReport, fetchPieces, openWeightsStore } from './fetcher.js'
import { discoverWeightPeers } from './peers.js'

/** Where fetched models are kept: `$LAYERSWARM_HOME/models`, else `~/.layerswarm/models`. */
export function defaultModelsDir(): string {
  return join(process.env.LAYERSWARM_HOME ?? join(homedir(), '.layerswarm'), 'models')
}

export interface FetchModelInit extends FetchOptions {
  readonly host: Host
  /** The content id (lsw1-…) the user typed. */
  readonly contentId: string
  readonly modelsDir?: string
  /** What to fetch, once the header (and so the config) is known. */
  readonly want: (config: ModelConfig, legacyModelId: string, options?: AbortOptions) => PieceWant | Promise<PieceWant>
}

export interface FetchedModel {
  readonly store: WeightsStore
  /** The model as stored: reading a tensor not fetched throws TensorNotHeldError. */
  readonly model: ModelFile
  /** The sampled id nodes announce (from the checked manifest). */
  readonly legacyModelId: string
  readonly report: FetchReport
  /** The peers asked (for a later fetch of more chunks through the same host). */
  readonly peers: readonly PeerId[]
}

/**
 * Issue 33, items 3-4: fetch what a node's span or a client's edge needs from the peers `host`
 * is connected to (and those they announce), checked against `contentId`, into the models folder.
 */
export async function fetchModel(init: FetchModelInit): Promise<FetchedModel> {
  if (!isContentModelId(init.contentId))
    throw new InvalidArgumentError(
      `${init.contentId} is not a content model id (lsw1- and 64 hex digits; \`layerswarm inspect\` prints it)`
    )
  const modelsDir = init.modelsDir ?? defaultModelsDir()
  const peers = await discoverWeightPeers(init.host, { signal: init.signal })
  const store = await openWeightsStore(init.host, peers, init.contentId, modelsDir, init)
  try {
    const head = await fetchPieces(init.host, peers, store, [0], init)
    const probe = openStoredModel(store)
    const config = probe.config
    probe.close()
    const pieces = piecesFor(store.manifest, await init.want(config, store.manifest.legacyModelId, { signal: init.signal }))
    const rest = await fetchPieces(init.host, peers, store, pieces, init)
    const peerStats = new Map<string, { chunks: number; bytes: number }>()
    for (const p of [...head.peers, ...rest.peers]) {
      const s = peerStats.get(p.peerId) ?? { chunks: 0, bytes: 0 }
      peerStats.set(p.peerId, { chunks: s.chunks + p.chunks, bytes: s.bytes + p.bytes })
    }
    const report: FetchReport = {
      ...rest,
      fetchedBytes: rest.fetchedBytes + head.fetchedBytes,
      // the header fetched first counts as fetched, not as held before
      reusedBytes: rest.reusedBytes - head.fetchedBytes,
      liars: [...head.liars, ...rest.liars],
      peers: [...peerStats].map(([peerId, s]) => ({ peerId, ...s }))
    }
    return { store, model: openStoredModel(store), legacyModelId: store.manifest.legacyModelId, report, peers }
  } catch (err) {
    store.close()
    throw err
  }
}

/** The client's edge: embeddings, head, final norm, blocks [0, first) and [last, n). */
export function edgeWant(edgeFirst: number, edgeLast: number): (c: ModelConfig) => PieceWant {
  return (c) => ({
    edge: true,
    blocks: [
      [0, edgeFirst],
      [c.nLayers - edgeLast, c.nLayers]
    ]
  })
}
