import { join } from 'node:path'
import type { PeerId } from '@libp2p/interface'
import { type Host, requestWeights } from '../../protocol/index.js'
import {
  checkManifest,
  chunkCount,
  chunkMatches,
  chunkRange,
  locateChunk,
  type WeightsManifest,
  WeightsStore
} from '../../shards/index.js'
import { WeightsUnavailableError } from '../errors.js'
import { type LiarRecord, recordLiars, savedLiars } from './liars.js'

/*
 * Issue 33, item 2: fetch pieces of a model from the swarm. Each peer says which chunks it holds;
 * every peer gets `concurrencyPerPeer` workers that take the next missing chunk it holds, so
 * several peers serve at once. Each chunk is checked against the manifest before it is written;
 * a peer whose chunk does not match is recorded as a liar (liars.json in the store, kept across
 * runs), dropped, and the chunk goes back to the queue for another peer. What was written and
 * checked is saved in have.bin, so a fetch killed half way resumes where it stopped.
 */

export interface FetchOptions {
  readonly concurrencyPerPeer?: number
  /** Retries of a chunk across peers before the fetch gives up. */
  readonly maxTriesPerChunk?: number
  readonly onProgress?: (doneBytes: number, totalBytes: number) => void
  readonly log?: (event: Record<string, unknown>) => void
  readonly signal?: AbortSignal
  /** Only these chunks (global numbers) of the pieces asked: a thin client's head rows (issue #35 item 4). */
  readonly onlyChunks?: ReadonlySet<number>
}

export interface FetchReport {
  /** Bytes of the pieces asked for, and of those fetched now (the rest were held already). */
  readonly neededBytes: number
  readonly fetchedBytes: number
  readonly reusedBytes: number
  readonly fileBytes: number
  readonly liars: readonly LiarRecord[]
  readonly peers: ReadonlyArray<{ peerId: string; chunks: number; bytes: number }>
}

const timeout = (signal: AbortSignal | undefined, ms: number): AbortSignal =>
  signal ? AbortSignal.any([signal, AbortSignal.timeout(ms)]) : AbortSignal.timeout(ms)

/**
 * The store of `contentId` under `modelsDir`: its manifest from disk, else from the first peer
 * whose manifest hashes to the id (a peer sending another is recorded as a liar).
 */
export async function openWeightsStore(
  host: Host,
  peers: readonly PeerId[],
  contentId: string,
  modelsDir: string,
  { signal, log }: FetchOptions = {}
): Promise<WeightsStore> {
  const saved = WeightsStore.savedManifest(modelsDir, contentId)
  if (saved) return WeightsStore.open(modelsDir, contentId, saved)
  const avoid = savedLiars(join(modelsDir, contentId))
  const liars: LiarRecord[] = []
  for (const peer of peers) {
    if (avoid.has(peer.toString())) continue
    try {
      const r = await requestWeights(host, peer, { contentId, kind: 'manifest', chunk: 0 }, { signal: timeout(signal, 15_000) })
      if (!r.manifest) continue
      try {
        checkManifest(r.manifest as WeightsManifest, contentId)
      } catch (err) {
        liars.push({ peerId: peer.toString(), what: 'manifest', reason: (err as Error).message, atMs: Date.now() })
        continue
      }
      const store = WeightsStore.open(modelsDir, contentId, r.manifest as WeightsManifest)
      recordLiars(store.dir, liars)
      log?.({
        event: 'weights-manifest',
        peerId: peer.toString(),
        pieces: r.manifest.pieces.length,
        fileBytes: r.manifest.fileBytes
      })
      return store
    } catch (err) {
      signal?.throwIfAborted()
      log?.({ event: 'weights-peer-error', peerId: peer.toString(), message: (err as Error).message })
    }
  }
  throw new WeightsUnavailableError(`none of ${peers.length} peers served a manifest that hashes to ${contentId}`)
}

/** Fetch the chunks of `pieces` the store does not hold yet. */
export async function fetchPieces(
  host: Host,
  peers: readonly PeerId[],
  store: WeightsStore,
  pieces: readonly number[],
  o: FetchOptions = {}
): Promise<FetchReport> {
  const m = store.manifest
  const wanted: number[] = []
  let neededBytes = 0
  const sizeOf = (g: number): number => {
    const { piece, chunk } = locateChunk(m, store.firstChunk, g)
    return chunkRange(m, piece, chunk).sizeBytes
  }
  for (const i of pieces) {
    const n = chunkCount(m.pieces[i].sizeBytes, m.chunkBytes)
    for (let c = 0; c < n; c++) {
      const g = store.firstChunk[i] + c
      if (o.onlyChunks && !o.onlyChunks.has(g)) continue
      neededBytes += sizeOf(g)
      if (!store.has(g)) wanted.push(g)
    }
  }
  const missingBytes = wanted.reduce((s, g) => s + sizeOf(g), 0)
  const reusedBytes = neededBytes - missingBytes
  const liars: LiarRecord[] = []
  const avoid = savedLiars(store.dir)
  const stats = new Map<string, { chunks: number; bytes: number }>()
  if (wanted.length === 0) return { neededBytes, fetchedBytes: 0, reusedBytes, fileBytes: m.fileBytes, liars, peers: [] }
  // what each peer holds (peers without the model answer NOT_FOUND and are left out)
  const holders: Array<{ peer: PeerId; have: Uint8Array; alive: boolean; failures: number }> = []
  await Promise.all(
    peers
      .filter((p) => !avoid.has(p.toString()))
      .map(async (peer) => {
        try {
          const r = await requestWeights(
            host,
            peer,
            { contentId: store.id, kind: 'have', chunk: 0 },
            { signal: timeout(o.signal, 15_000) }
          )
          if (r.have) holders.push({ peer, have: r.have, alive: true, failures: 0 })
        } catch {}
      })
  )
  holders.sort((a, b) => a.peer.toString().localeCompare(b.peer.toString()))
  const queue = [...wanted]
  const tries = new Map<number, number>()
  const maxTries = o.maxTriesPerChunk ?? 8
  let fetchedBytes = 0
  let sinceSave = 0
  let fatal: Error | undefined
  const holds = (h: (typeof holders)[number], g: number): boolean => (h.have[g >> 3] & (1 << (g & 7))) !== 0
  const worker = async (h: (typeof holders)[number]): Promise<void> => {
    while (h.alive && !fatal) {
      o.signal?.throwIfAborted()
      const k = queue.findIndex((g) => holds(h, g))
      if (k < 0) return
      const g = queue.splice(k, 1)[0]
      const { piece, chunk } = locateChunk(m, store.firstChunk, g)
      let bytes: Uint8Array | undefined
      try {
        const r = await requestWeights(
          host,
          h.peer,
          { contentId: store.id, kind: 'chunk', chunk: g },
          { signal: timeout(o.signal, 120_000) }
        )
        bytes = r.chunk
        if (!bytes) throw new WeightsUnavailableError(r.errorMessage ?? `no chunk ${g}`)
      } catch (err) {
        o.signal?.throwIfAborted()
        queue.unshift(g)
        if (++h.failures >= 3) h.alive = false
        o.log?.({ event: 'weights-peer-error', peerId: h.peer.toString(), chunk: g, message: (err as Error).message })
        continue
      }
      if (!chunkMatches(m, piece, chunk, bytes)) {
        // a lie (or a broken disk): never used, never asked of this peer again
        h.alive = false
        const liar = {
          peerId: h.peer.toString(),
          what: `chunk ${g} (${m.pieces[piece].name})`,
          reason: 'hash mismatch',
          atMs: Date.now()
        }
        liars.push(liar)
        recordLiars(store.dir, [liar])
        o.log?.({ event: 'weights-liar', ...liar })
        const t = (tries.get(g) ?? 0) + 1
        tries.set(g, t)
        if (t >= maxTries) fatal = new WeightsUnavailableError(`chunk ${g} failed its check ${t} times`)
        queue.unshift(g)
        continue
      }
      store.writeChunk(g, bytes)
      fetchedBytes += bytes.length
      const s = stats.get(h.peer.toString()) ?? { chunks: 0, bytes: 0 }
      s.chunks++
      s.bytes += bytes.length
      stats.set(h.peer.toString(), s)
      o.onProgress?.(reusedBytes + fetchedBytes, neededBytes)
      if (++sinceSave >= 16) {
        store.save()
        sinceSave = 0
      }
    }
  }
  // rounds: a chunk put back by a dropped peer is taken by the others' workers; a round ends when
  // no live worker can take anything, and another starts only if some live peer holds what is left
  try {
    while (queue.length > 0 && !fatal) {
      const live = holders.filter((h) => h.alive && queue.some((g) => holds(h, g)))
      if (live.length === 0) break
      const per = o.concurrencyPerPeer ?? 4
      // interleaved: every peer's first worker starts before any peer's second, so each peer serves
      const workers: Array<(typeof holders)[number]> = []
      for (let w = 0; w < per; w++) workers.push(...live)
      await Promise.all(workers.map(worker))
    }
  } finally {
    store.save()
  }
  if (fatal) throw fatal
  if (queue.length > 0)
    throw new WeightsUnavailableError(
      `${queue.length} chunks of ${store.id} are held by no honest reachable peer (${holders.length} peers hold some; ${liars.length} lied)`
    )
  return {
    neededBytes,
    fetchedBytes,
    reusedBytes,
    fileBytes: m.fileBytes,
    liars,
    peers: [...stats].map(([peerId, s]) => ({ peerId, ...s }))
  }
}
