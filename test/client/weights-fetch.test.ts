import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fetchPieces, openWeightsStore, readLiars, type Seeder, serveWeights } from '../../client/index.js'
import {
  createHost,
  decodeWeightsRequest,
  decodeWeightsResponse,
  encodeWeightsRequest,
  encodeWeightsResponse,
  type Host,
  requestWeights
} from '../../protocol/index.js'
import {
  buildWeightsManifest,
  chunkCount,
  computeModelId,
  contentModelId,
  fileSource,
  openGgufModelFrom,
  parseShape,
  RangedFile,
  type WeightsManifest,
  writeRandomModel
} from '../../shards/index.js'

// Issue 33, item 2, in one process over real libp2p (TCP, Noise, yamux) on 127.0.0.1: chunked,
// parallel, checked, resumable fetches; a lying seeder recorded and routed around. A random GGUF
// whose embeddings and FFN matrices span several 1 MiB chunks.

const dir = mkdtempSync(join(tmpdir(), 'weights-fetch-'))
const path = join(dir, 'model.gguf')
let manifest: WeightsManifest
let id = ''
const hosts: Host[] = []
const seeders: Seeder[] = []
let honest: Host
let liar: Host
let fetcher: Host

const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex')

beforeAll(async () => {
  writeRandomModel(path, parseShape('256,3,4,4,1024,2048'), { dtype: 'f32', seed: 7 })
  const m = openGgufModelFrom(new RangedFile(path))
  manifest = await buildWeightsManifest(path, computeModelId(m))
  m.close()
  id = contentModelId(manifest)
  const start = async (tamper: boolean): Promise<Host> => {
    const h = await createHost({ listen: ['/ip4/127.0.0.1/tcp/0'], pubsub: false })
    hosts.push(h)
    seeders.push(await serveWeights(h, [fileSource(path, id, manifest)], { tamper, maxPeerUploadBytesPerSecond: 200e6 }))
    return h
  }
  honest = await start(false)
  liar = await start(true)
  fetcher = await createHost({
    listen: [],
    pubsub: false,
    bootstrap: [honest.getMultiaddrs()[0].toString(), liar.getMultiaddrs()[0].toString()]
  })
  hosts.push(fetcher)
}, 120_000)

afterAll(async () => {
  for (const s of seeders) await s.stop()
  for (const h of hosts) await h.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('weights fetch over libp2p', () => {
  it('the model has multi-chunk tensors', () => {
    expect(manifest.pieces.some((p) => chunkCount(p.sizeBytes, manifest.chunkBytes) > 1)).toBe(true)
  })

  it('fetches part, resumes the rest after a restart, and the file equals the original; the liar is recorded', async () => {
    const modelsDir = join(dir, 'models-a')
    const peers = [honest.peerId, liar.peerId]
    const all = [...manifest.pieces.keys()]
    const half = all.slice(0, Math.ceil(all.length / 2))
    const s1 = await openWeightsStore(fetcher, peers, id, modelsDir)
    const r1 = await fetchPieces(fetcher, peers, s1, half)
    s1.close()
    expect(r1.fetchedBytes).toBe(r1.neededBytes)
    expect([...new Set(r1.liars.map((l) => l.peerId))]).toEqual([liar.peerId.toString()])
    // every chunk came from the honest seeder, the liar's was fetched again there
    expect(r1.peers.map((p) => p.peerId)).toEqual([honest.peerId.toString()])
    expect(readLiars(join(modelsDir, id)).map((l) => l.peerId)).toContain(liar.peerId.toString())
    // a "restart": the store is opened again from disk and only what is missing is fetched
    const s2 = await openWeightsStore(fetcher, peers, id, modelsDir)
    const r2 = await fetchPieces(fetcher, peers, s2, all)
    s2.close()
    expect(r2.reusedBytes).toBe(r1.fetchedBytes)
    expect(r2.fetchedBytes + r2.reusedBytes).toBe(r2.neededBytes)
    // the recorded liar is not even asked again
    expect(r2.liars).toEqual([])
    expect(sha(readFileSync(join(modelsDir, id, 'model.gguf')))).toBe(sha(readFileSync(path)))
  })

  it('with only the liar, the fetch fails with WEIGHTS_UNAVAILABLE and writes nothing false', async () => {
    const modelsDir = join(dir, 'models-b')
    const store = await openWeightsStore(fetcher, [liar.peerId], id, modelsDir)
    await expect(fetchPieces(fetcher, [liar.peerId], store, [1, 2])).rejects.toMatchObject({ code: 'WEIGHTS_UNAVAILABLE' })
    expect(store.holdsPiece(1)).toBe(false)
    store.close()
    expect(existsSync(join(modelsDir, id, 'liars.json'))).toBe(true)
  })

  it('a manifest that does not hash to the id is refused', async () => {
    const other = `lsw1-${'0'.repeat(64)}`
    await expect(openWeightsStore(fetcher, [honest.peerId], other, join(dir, 'models-c'))).rejects.toMatchObject({
      code: 'WEIGHTS_UNAVAILABLE'
    })
    const r = await requestWeights(fetcher, honest.peerId, { contentId: other, kind: 'manifest', chunk: 0 })
    expect(r.errorCode).toBe('NOT_FOUND')
  })

  it('codecs round-trip and refuse malformed requests', () => {
    const req = { contentId: id, kind: 'chunk' as const, chunk: 5 }
    expect(decodeWeightsRequest(encodeWeightsRequest(req))).toEqual(req)
    const res = decodeWeightsResponse(encodeWeightsResponse({ manifest }))
    expect(contentModelId(res.manifest as WeightsManifest)).toBe(id)
    expect(() => decodeWeightsRequest(new Uint8Array(300))).toThrow(expect.objectContaining({ code: 'TOO_LARGE' }))
    expect(() => decodeWeightsRequest(Uint8Array.from([0x10, 0x09]))).toThrow(expect.objectContaining({ code: 'MALFORMED' }))
  })
})
