import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { lowDimensionalHead } from '../../../client/head/index.js'
import { pickHeadChunks } from '../../../client/weights/head-chunks.js'
import {
  buildWeightsManifest,
  chunkLayout,
  chunkRange,
  contentModelId,
  HeadRows,
  type ModelFile,
  openModelFile,
  openStoredModel,
  parseShape,
  piecesFor,
  RangedFile,
  type WeightsManifest,
  WeightsStore,
  writeRandomModel,
  Xorshift64
} from '../../../shards/index.js'

// Issue #35 item 4: a client whose head runs on a peer holds only some head rows. HeadRows reads
// those rows alone (ModelFile.readMatrixRows) instead of the whole head; the rows it holds, and so
// every logit and bound it checks the peer with, equal those built from the full matrix.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-head-rows-thin-'))
const VOCAB = 4096
const DIM = 64

/** The same model without row reads: HeadRows then reads the whole head matrix, as before. */
function fullMatrixOnly(model: ModelFile): ModelFile {
  const { readMatrixRows: _rows, ...rest } = model
  return rest
}

afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('head rows without the whole head', () => {
  for (const dtype of ['f32', 'q8_0', 'q6_k'] as const) {
    it(`${dtype}: rows read alone equal rows from the full matrix, logits and σ bit for bit`, () => {
      const path = join(dir, `${dtype}.gguf`)
      writeRandomModel(path, parseShape(`${DIM},2,4,2,96,${VOCAB},untied`), { dtype, seed: 7 })
      const model = openModelFile(path)
      try {
        const thin = new HeadRows(model)
        const full = new HeadRows(fullMatrixOnly(model))
        const rng = new Xorshift64(11)
        const ids = Array.from({ length: 300 }, () => Math.floor(rng.nextF32() * VOCAB))
        ids.push(0, VOCAB - 1)
        thin.add(ids)
        full.add(ids)
        expect(thin.ids).toEqual(full.ids)
        const hidden = Float32Array.from({ length: DIM }, () => rng.nextF32() * 2 - 1)
        for (const check of ['f32', 'q8_0'] as const) {
          const a = thin.evaluate(hidden, check)
          const b = full.evaluate(hidden, check)
          expect(a.ids).toEqual(b.ids)
          expect(a.logits).toEqual(b.logits)
          expect(a.sigmas).toEqual(b.sigmas)
        }
        // the thin one read each distinct row's stored bytes once; the other the whole head
        const info = model.matrixInfo!('output')
        const headBytes = model.readMatrix('output').data.byteLength
        expect(full.storedBytesRead).toBe(headBytes)
        expect(thin.storedBytesRead).toBe((thin.ids.length * headBytes) / info.rows)
      } finally {
        model.close()
      }
    })
  }

  it('rows outside what the client holds are left out; a row outside the vocabulary is refused', () => {
    const path = join(dir, 'f32.gguf')
    const model = openModelFile(path)
    try {
      const readable = (id: number) => id >= 1000 && id < 2000
      const rows = lowDimensionalHead(model, 200, readable)
      expect(rows.ids.length).toBe(200)
      expect(rows.ids.every(readable)).toBe(true)
      rows.add([5, 1500, 3000])
      expect(rows.has(5)).toBe(false)
      expect(rows.has(1500)).toBe(true)
      expect(() => rows.add([VOCAB])).toThrow(/outside the vocabulary/)
    } finally {
      model.close()
    }
  })

  it('a store holding one head chunk reads those rows as the file; other rows, and the whole head, are TENSOR_NOT_HELD', async () => {
    const path = join(dir, 'store.gguf')
    // 16384 f32 rows of 64: a 4 MiB head, four 1 MiB chunks of 4096 rows
    writeRandomModel(path, parseShape(`${DIM},2,4,2,96,16384,untied`), { dtype: 'f32', seed: 9 })
    const m = await buildWeightsManifest(path, 'lsm1-test')
    const names = (idx: number[]) => idx.map((i) => m.pieces[i].name)
    expect(names(piecesFor(m, { edge: true, blocks: [], skipHead: true }))).not.toContain('output.weight')
    expect(names(piecesFor(m, { edge: true, blocks: [] }))).toContain('output.weight')
    const store = WeightsStore.open(join(dir, 'models'), contentModelId(m), m)
    const src = new RangedFile(path)
    const head = m.pieces.findIndex((p) => p.name === 'output.weight')
    const norm = m.pieces.findIndex((p) => p.name === 'output_norm.weight')
    const write = (i: number, c: number) => {
      const r = chunkRange(m, i, c)
      store.writeChunk(store.firstChunk[i] + c, src.read(r.offsetBytes, r.sizeBytes, 'chunk'))
    }
    for (let c = 0; c < Math.ceil(m.pieces[0].sizeBytes / m.chunkBytes); c++) write(0, c)
    write(norm, 0)
    write(head, 1)
    src.close()
    const stored = openStoredModel(store)
    const original = openModelFile(path)
    try {
      expect(stored.readMatrixRows!('output', 4096, 4096).data).toEqual(original.readMatrixRows!('output', 4096, 4096).data)
      expect(() => stored.readMatrixRows!('output', 4095, 2)).toThrow(expect.objectContaining({ code: 'TENSOR_NOT_HELD' }))
      expect(() => stored.readMatrixRows!('output', 0, 1)).toThrow(expect.objectContaining({ code: 'TENSOR_NOT_HELD' }))
      expect(() => stored.readMatrix('output')).toThrow(expect.objectContaining({ code: 'TENSOR_NOT_HELD' }))
      // the client's rows from the store equal those from the file
      const readable = (id: number) => id >= 4096 && id < 8192
      const a = lowDimensionalHead(stored, 256, readable)
      const b = new HeadRows(original)
      b.add(a.ids)
      const hidden = Float32Array.from({ length: DIM }, (_, j) => Math.sin(j))
      expect(a.evaluate(hidden, 'q8_0').logits).toEqual(b.evaluate(hidden, 'q8_0').logits)
    } finally {
      stored.close()
      original.close()
      store.close()
    }
  })

  it('a secret choice of head chunks holds the secret rows, and only rows wholly inside them are readable', () => {
    // a manifest's layout only (no hashes needed to choose): header, embeddings, head, 64 KiB chunks
    const piece = (name: string, offsetBytes: number, sizeBytes: number) => ({
      name,
      offsetBytes,
      sizeBytes,
      chunkHashes: new Uint8Array(0)
    })
    const m: WeightsManifest = {
      fileBytes: 4096 + 2 * VOCAB * 256,
      chunkBytes: 64 * 1024,
      legacyModelId: 'lsm1-x',
      pieces: [
        piece('gguf-header', 0, 4096),
        piece('token_embd.weight', 4096, VOCAB * 256),
        piece('output.weight', 4096 + VOCAB * 256, VOCAB * 256)
      ]
    }
    const { firstChunk } = chunkLayout(m)
    const head = 2
    // f32 rows of 256 bytes: 256 rows per 64 KiB chunk, 16 chunks
    const pick = pickHeadChunks(m, firstChunk, head, VOCAB, 600)
    expect(pick.pieceChunks).toBe(16)
    expect(pick.chunks.size).toBe(3)
    expect([...pick.chunks].every((g) => g >= firstChunk[head] && g < firstChunk[head] + 16)).toBe(true)
    const local = [...pick.chunks].map((g) => g - firstChunk[head])
    for (let id = 0; id < VOCAB; id++) expect(pick.readable(id)).toBe(local.includes(Math.floor(id / 256)))
    expect(pick.readable(-1)).toBe(false)
    expect(pick.readable(VOCAB)).toBe(false)
  })
})
