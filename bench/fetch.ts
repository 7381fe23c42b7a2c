/**
 * `npm run bench -- fetch [--model 42m] [--dtype q8_0] [--seeders 3]`: weights from the swarm
 * (issue 33). Seeder node processes (`node start --model FILE`) on 127.0.0.1; this process
 * fetches every piece of the file, checked chunk by chunk, from 1 seeder and then from all of
 * them (MB/s); a `node start --model-id` child is killed mid-fetch and the fetch resumed (bytes
 * kept vs fetched again); and the client's bytes against the file for the 8B Q4_K_M shape,
 * computed from its tensor table (no 8B file needed). One JSON object on stdout.
 */

import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { peerIdFromString } from '@libp2p/peer-id'
import { DEFAULT_SECRET_ROWS } from '../client/head/index.js'
import { fetchPieces, openWeightsStore, pickHeadChunks } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import { createHost } from '../protocol/index.js'
import { createRandomModel, MODEL_SHAPES, openModelFile, type TensorName, type WeightDType } from '../shards/index.js'
import { rowBytes } from '../shards/quant/index.js'
import { embeddingRowsShare } from './fetch-embedding-rows.js'
import { benchArgs } from './options.js'
import { resolveModel } from './swarm-setup.js'

const CLI = new URL('../node/cli.js', import.meta.url).pathname

async function fetchAll(addrs: string[], ids: string[], contentId: string, modelsDir: string) {
  const host = await createHost({ listen: [], pubsub: false, bootstrap: addrs })
  try {
    const peers = ids.map((id) => peerIdFromString(id))
    const store = await openWeightsStore(host, peers, contentId, modelsDir)
    const t0 = performance.now()
    const r = await fetchPieces(host, peers, store, [...store.manifest.pieces.keys()], { concurrencyPerPeer: 4 })
    const seconds = (performance.now() - t0) / 1000
    store.close()
    return {
      seconds,
      fetchedBytes: r.fetchedBytes,
      reusedBytes: r.reusedBytes,
      mbPerSecond: r.fetchedBytes / 1e6 / seconds,
      peers: r.peers
    }
  } finally {
    await host.stop()
  }
}

/** Bits set in a have.bin. */
function heldChunks(path: string): number {
  if (!existsSync(path)) return 0
  let n = 0
  for (const b of readFileSync(path)) for (let i = 0; i < 8; i++) n += (b >> i) & 1
  return n
}

/** Kill a `node start --model-id` child once it holds `fraction` of the chunks, then resume here. */
async function resumeAfterKill(seeders: LocalNode[], contentId: string, nLayers: number, totalChunks: number, fraction: number) {
  const home = mkdtempSync(join(tmpdir(), 'bench-fetch-resume-'))
  const modelsDir = join(home, 'models')
  const args = [CLI, 'node', 'start', '--model-id', contentId, '--layers', `0:${nLayers}`, '--ephemeral-identity']
  args.push('--models-dir', modelsDir, '--bootstrap', seeders.map((s) => s.addrs[0]).join(','))
  const child = spawn(process.execPath, args, { stdio: 'ignore', env: { ...process.env, LAYERSWARM_HOME: home } })
  const have = join(modelsDir, contentId, 'have.bin')
  let heldAtKill = 0
  for (;;) {
    await new Promise((r) => setTimeout(r, 20))
    heldAtKill = heldChunks(have)
    if (heldAtKill >= totalChunks * fraction || child.exitCode !== null) break
  }
  child.kill('SIGKILL')
  await new Promise((r) => child.once('exit', r))
  heldAtKill = heldChunks(have)
  // the child wanted every block (not the embeddings and head); the resume fetches every piece
  const r = await fetchAll(
    seeders.map((s) => s.addrs[0]),
    seeders.map((s) => s.peerId),
    contentId,
    modelsDir
  )
  rmSync(home, { recursive: true, force: true })
  return { chunksHeldAtKill: heldAtKill, reusedBytes: r.reusedBytes, fetchedOnResumeBytes: r.fetchedBytes }
}

/** The client's bytes for the 8B shape in Q4_K_M, from its tensor table (shards/formats/random-model.ts). */
function clientBytes8b() {
  const model = createRandomModel(MODEL_SHAPES['8b'], { dtype: 'q4_k_m', seed: 1 })
  const c = model.config
  const size = (name: TensorName, vector: boolean): number => {
    if (vector) return c.dim * 4
    const m = model.matrixInfo!(name)
    return m.rows * rowBytes(m.dtype as WeightDType, m.cols)
  }
  const block = (l: number): number =>
    (['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'] as const).reduce(
      (s, t) => s + size(`blk.${l}.${t}`, false),
      2 * size(`blk.${l}.attn_norm`, true)
    )
  let blocks = 0
  for (let l = 0; l < c.nLayers; l++) blocks += block(l)
  const embd = size('token_embd', false)
  const head = c.tiedEmbeddings ? 0 : size('output', false)
  const norm = c.dim * 4
  const fileBytes = blocks + embd + head + norm
  const edgeBytes = embd + head + norm + block(0) + block(c.nLayers - 1)
  model.close()
  return {
    shape: '8b q4_k_m (tensor table; header and tokenizer not counted)',
    fileBytes,
    edgeBytes,
    edgeFraction: edgeBytes / fileBytes,
    embeddingsBytes: embd,
    headBytes: head,
    edgeBlocksBytes: block(0) + block(c.nLayers - 1),
    // not built: embedding rows fetched per token would leave the head and edge blocks only
    edgeWithoutEmbeddingsFraction: (edgeBytes - embd) / fileBytes,
    // ... but rows are checked by 1 MiB chunk: what one exchange's tokens would fetch (fetch-embedding-rows.ts)
    perTokenRows: perTokenRows(embd, c.vocabSize, edgeBytes, fileBytes),
    remoteHead: remoteHead8b(c.dim, c.vocabSize, head, fileBytes, embd + norm + block(0))
  }
}

/** The edge with embedding chunks fetched as one exchange's tokens need them, against the file. */
function perTokenRows(embd: number, vocab: number, edgeBytes: number, fileBytes: number) {
  const r = embeddingRowsShare(embd, vocab)
  return { ...r, edgeFractionPerExchange: (edgeBytes - embd + r.bytesPerExchange) / fileBytes }
}

/**
 * Issue #35 item 4: with `--head remote` the client fetches no last block and, of the head, only
 * the 1 MiB chunks holding its secret rows (client/weights/head-chunks.ts), and holds those rows
 * in f32 instead of the head matrix.
 */
function remoteHead8b(dim: number, vocab: number, headBytes: number, fileBytes: number, restBytes: number) {
  const chunkBytes = 1 << 20
  const m = {
    fileBytes: headBytes,
    chunkBytes,
    legacyModelId: 'lsm1-',
    pieces: [{ name: 'output.weight', offsetBytes: 0, sizeBytes: headBytes, chunkHashes: new Uint8Array(0) }]
  }
  const pick = pickHeadChunks(m, [0], 0, vocab, DEFAULT_SECRET_ROWS)
  const headFetchedBytes = pick.chunks.size * chunkBytes
  return {
    secretRows: DEFAULT_SECRET_ROWS,
    headChunks: pick.chunks.size,
    ofHeadChunks: pick.pieceChunks,
    headFetchedBytes,
    edgeBytes: restBytes + headFetchedBytes,
    edgeFraction: (restBytes + headFetchedBytes) / fileBytes,
    // the client's head memory: its rows in f32, against the head matrix as stored
    headRowsHeldBytes: DEFAULT_SECRET_ROWS * dim * 4,
    headMatrixBytes: headBytes
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = benchArgs(argv, { model: '42m', dtype: 'q8_0', seed: '1', seeders: '3', 'kill-at': '0.4' })
  const { path } = resolveModel({
    model: a.required('model', 'a GGUF or a shape'),
    dtype: a.string('dtype') as never,
    seed: a.int('seed', 0)
  })
  const n = a.int('seeders', 1)
  const seeders: LocalNode[] = []
  const homes: string[] = []
  try {
    for (let i = 0; i < n; i++) {
      const home = mkdtempSync(join(tmpdir(), 'bench-fetch-seed-'))
      homes.push(home)
      seeders.push(
        await startLocalNode({
          model: path,
          layers: '0:1',
          bootstrap: seeders.length ? [seeders[0].addrs[0]] : [],
          env: { ...process.env, LAYERSWARM_HOME: home },
          startTimeoutMs: 600_000
        })
      )
    }
    const contentId = (seeders[0] as unknown as { contentId: string }).contentId
    const runs = []
    for (const k of [...new Set([1, n])]) {
      const dir = mkdtempSync(join(tmpdir(), 'bench-fetch-'))
      const r = await fetchAll(
        seeders.slice(0, k).map((s) => s.addrs[0]),
        seeders.slice(0, k).map((s) => s.peerId),
        contentId,
        dir
      )
      rmSync(dir, { recursive: true, force: true })
      runs.push({ seeders: k, ...r, peers: r.peers.map((p) => p.bytes) })
    }
    const manifest = JSON.parse(
      readFileSync(join(homes[0], 'models', 'manifests', readdirSync(join(homes[0], 'models', 'manifests'))[0]), 'utf8')
    ) as {
      fileBytes: number
      chunkBytes: number
      pieces: Array<{ sizeBytes: number }>
    }
    const totalChunks = manifest.pieces.reduce((s, p) => s + Math.max(1, Math.ceil(p.sizeBytes / manifest.chunkBytes)), 0)
    const nLayers = openModelFile(path).config.nLayers
    const resume = await resumeAfterKill(seeders, contentId, nLayers, totalChunks, a.number('kill-at', 0, false))
    console.log(
      JSON.stringify(
        {
          bench: 'fetch',
          model: path,
          fileBytes: manifest.fileBytes,
          chunks: totalChunks,
          contentId,
          runs,
          resume,
          client8b: clientBytes8b()
        },
        null,
        2
      )
    )
  } finally {
    await Promise.all(seeders.map((s) => s.stop()))
    for (const h of homes) rmSync(h, { recursive: true, force: true })
  }
}
