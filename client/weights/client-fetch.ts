import type { AbortOptions } from '@libp2p/interface'
import { createHost, type Host } from '../../protocol/index.js'
import { type ModelConfig, type ModelFile, type PieceWant, piecesBytes, piecesFor } from '../../shards/index.js'
import type { ClientInit } from '../client-types.js'
import { DEFAULT_SECRET_ROWS } from '../head/index.js'
import { DEFAULT_EDGE_FIRST, DEFAULT_EDGE_LAST } from '../options.js'
import { edgeOnlyModel } from '../verification/canaries/canary-bank-init.js'
import { edgeWant, fetchModel } from './fetch-model.js'
import { fetchPieces } from './fetcher.js'
import { pickHeadChunks } from './head-chunks.js'
import { type Seeder, serveWeights } from './seeder.js'
import { wholePiecesSource } from './whole-pieces.js'

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
  /** Who served the bytes fetched by this run (nodes, and clients that seed what they fetched). */
  readonly peers: ReadonlyArray<{ readonly peerId: string; readonly chunks: number; readonly bytes: number }>
  /**
   * Issue #35 item 4, with the head on a peer: the head's chunks fetched (a secret random choice
   * holding the client's secret rows) against the head's, in chunks and bytes. Absent with the
   * head local or tied to the embeddings (then the embeddings, so the head, are fetched whole).
   */
  readonly head?: { readonly chunks: number; readonly ofChunks: number; readonly bytes: number; readonly ofBytes: number }
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
): Promise<{
  host: Host
  model: ModelFile
  fetched: FetchedWeights
  headReadable?: (id: number) => boolean
  seeder?: Seeder
}> {
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
    // with the head on a peer the last block runs there too (edgeLast is 0)
    const j = init.head === 'remote' ? 0 : (init.edgeLast ?? DEFAULT_EDGE_LAST)
    const middle = init.canaries !== false && init.canaryBank === undefined
    // canary prompts are sampled from the whole model (client/verification/canaries/canary-secret.ts), head
    // included: without a bank the head is fetched whole, with a bank or canaries off only its rows
    const remoteHead = init.head === 'remote' && !middle
    // said, not silent (issue #35, session 4): the thin option's head saving is lost here
    if (init.head === 'remote' && middle)
      init.log?.({
        event: 'head-fetched-whole',
        reason:
          'canaries without a bank sample their prompts through the whole model, head included; a canary bank (--canary-bank) or --canary-rate 0 fetches only the head chunks of the secret rows'
      })
    const edge = edgeWant(k, j)
    const headless = (c: ModelConfig): PieceWant => ({ ...edge(c), ...(remoteHead ? { skipHead: true } : {}) })
    const f = await fetchModel({
      host,
      contentId,
      ...(init.modelsDir !== undefined ? { modelsDir: init.modelsDir } : {}),
      want: (c) => (middle ? { edge: true, blocks: [[0, c.nLayers]] } : headless(c)),
      log: init.log,
      signal: options.signal
    })
    const m = f.store.manifest
    const headPiece = m.pieces.findIndex((p) => p.name === 'output.weight')
    let head: FetchedWeights['head']
    let headReadable: ((id: number) => boolean) | undefined
    let more: { fetchedBytes: number; reusedBytes: number; liars: string[]; peers: FetchedWeights['peers'] } = {
      fetchedBytes: 0,
      reusedBytes: 0,
      liars: [],
      peers: []
    }
    if (remoteHead && headPiece >= 0) {
      const pick = pickHeadChunks(
        m,
        f.store.firstChunk,
        headPiece,
        f.model.config.vocabSize,
        init.headSecretRows ?? DEFAULT_SECRET_ROWS
      )
      const r = await fetchPieces(host, f.peers, f.store, [headPiece], {
        onlyChunks: pick.chunks,
        log: init.log,
        signal: options.signal
      })
      head = {
        chunks: pick.chunks.size,
        ofChunks: pick.pieceChunks,
        bytes: r.neededBytes,
        ofBytes: m.pieces[headPiece].sizeBytes
      }
      headReadable = pick.readable
      more = { fetchedBytes: r.fetchedBytes, reusedBytes: r.reusedBytes, liars: r.liars.map((l) => l.peerId), peers: r.peers }
    }
    const n = f.model.config.nLayers
    const edgeBytes = piecesBytes(m, piecesFor(m, headless(f.model.config))) + (head?.bytes ?? 0)
    const fetched: FetchedWeights = {
      contentId,
      legacyModelId: f.legacyModelId,
      path: f.store.path,
      fileBytes: f.report.fileBytes,
      edgeBytes,
      canaryBytes: f.report.neededBytes + (head?.bytes ?? 0) - edgeBytes,
      fetchedBytes: f.report.fetchedBytes + more.fetchedBytes,
      reusedBytes: f.report.reusedBytes + more.reusedBytes,
      liars: [...f.report.liars.map((l) => l.peerId), ...more.liars],
      peers: [...f.report.peers, ...more.peers],
      ...(head ? { head } : {})
    }
    const model = middle ? f.model : edgeOnlyModel(f.model, k, n - j)
    // issue 33: a client serves on what it fetched, as a node does (seedWeights false: it does not)
    const seed = init.seedWeights
    if (seed === false) {
      f.store.close()
      return { host, model, fetched, ...(headReadable ? { headReadable } : {}) }
    }
    const seeder = await serveWeights(host, [wholePiecesSource(f.store)], { ...seed, log: init.log })
    return { host, model, fetched, seeder, ...(headReadable ? { headReadable } : {}) }
  } catch (err) {
    await host.stop()
    throw err
  }
}
