import type { AbortOptions } from '@libp2p/interface'
import { createHost, type Host } from '../../protocol/index.js'
import { type ModelFile, piecesBytes, piecesFor } from '../../shards/index.js'
import type { ClientInit } from '../client-types.js'
import { DEFAULT_EDGE_FIRST, DEFAULT_EDGE_LAST } from '../options.js'
import { edgeOnlyModel } from '../verification/canary-bank-init.js'
import { edgeWant, fetchModel } from './fetch-model.js'

/** What a client started by content id fetched: bytes against the file (issue 33, item 4). */
export interface FetchedWeights {
  readonly contentId: string
  readonly legacyModelId: string
  /** The store's model.gguf (a sparse file holding what was fetched). */
  readonly path: string
  readonly fileBytes: number
  /** The edge's pieces: header, embeddings, edge blocks, final norm, head. */
  readonly edgeBytes: number
  /** The middle blocks fetched for canary references (0 with a canary bank or canaries off). */
  readonly canaryBytes: number
  /** Bytes fetched by this run (the rest were in the store already). */
  readonly fetchedBytes: number
  readonly reusedBytes: number
  /** Peers recorded as having served bytes that fail their hash. */
  readonly liars: readonly string[]
}

/**
 * Issue 33, item 4: a thin client. Its host starts first, the edge's pieces are fetched through
 * it (from the bootstrap peers and those they announce), then the same host carries the session.
 * Canaries compute reference outputs of the middle blocks, so without a canary bank those blocks
 * are fetched too (checked the same way); with a bank or canaries off the client holds only its
 * edge, and reading a middle block throws BlockNotHeldError.
 */
export async function fetchClientModel(
  init: ClientInit,
  options: AbortOptions = {}
): Promise<{ host: Host; model: ModelFile; fetched: FetchedWeights }> {
  const contentId = init.modelId as string
  const host = await createHost(
    {
      listen: [...(init.listen ?? [])],
      announce: [...(init.announce ?? [])],
      bootstrap: [...init.bootstrap],
      privateKey: init.privateKey
    },
    options
  )
  try {
    const k = init.edgeFirst ?? DEFAULT_EDGE_FIRST
    const j = init.edgeLast ?? DEFAULT_EDGE_LAST
    const middle = init.canaries !== false && init.canaryBank === undefined
    const edge = edgeWant(k, j)
    const f = await fetchModel({
      host,
      contentId,
      ...(init.modelsDir !== undefined ? { modelsDir: init.modelsDir } : {}),
      want: (c) => (middle ? { edge: true, blocks: [[0, c.nLayers]] } : edge(c)),
      log: init.log,
      signal: options.signal
    })
    const n = f.model.config.nLayers
    const edgeBytes = piecesBytes(f.store.manifest, piecesFor(f.store.manifest, edge(f.model.config)))
    const fetched: FetchedWeights = {
      contentId,
      legacyModelId: f.legacyModelId,
      path: f.store.path,
      fileBytes: f.report.fileBytes,
      edgeBytes,
      canaryBytes: f.report.neededBytes - edgeBytes,
      fetchedBytes: f.report.fetchedBytes,
      reusedBytes: f.report.reusedBytes,
      liars: f.report.liars.map((l) => l.peerId)
    }
    f.store.close()
    return { host, model: middle ? f.model : edgeOnlyModel(f.model, k, n - j), fetched }
  } catch (err) {
    await host.stop()
    throw err
  }
}
