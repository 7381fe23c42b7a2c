import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { wholePiecesSource } from '../../client/index.js'
import {
  buildWeightsManifest,
  chunkCount,
  computeModelId,
  contentModelId,
  fileSource,
  InvalidArgumentError,
  openGgufModelFrom,
  parseShape,
  RangedFile,
  WeightsStore,
  writeRandomModel
} from '../../shards/index.js'

// Issue 33: a client seeds only the pieces it holds whole. A piece held in part (the head's
// secret chunks with `--head remote`) stays out of its `have` bitmap and is refused, so no peer
// learns which chunks, hence which check rows, the client chose.

const dir = mkdtempSync(join(tmpdir(), 'weights-seed-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('what a client seeds', () => {
  it('whole pieces only: a piece held in part is neither announced nor served', async () => {
    const path = join(dir, 'model.gguf')
    // an f32 embedding of 2048 × 256 is 2 MiB: two chunks
    writeRandomModel(path, parseShape('256,3,4,4,1024,2048'), { dtype: 'f32', seed: 7 })
    const m = openGgufModelFrom(new RangedFile(path))
    const manifest = await buildWeightsManifest(path, computeModelId(m))
    m.close()
    const id = contentModelId(manifest)
    const file = fileSource(path, id, manifest)
    const store = WeightsStore.open(join(dir, 'models'), id, manifest)
    const embd = manifest.pieces.findIndex((p) => p.name === 'token_embd.weight')
    const norm = manifest.pieces.findIndex((p) => p.name === 'output_norm.weight')
    expect(chunkCount(manifest.pieces[embd].sizeBytes, manifest.chunkBytes)).toBeGreaterThan(1)
    const e0 = store.firstChunk[embd]
    const n0 = store.firstChunk[norm]
    for (const g of [0, n0, e0]) store.writeChunk(g, file.readChunk(g)) // header and norm whole, embedding in part
    const seeded = wholePiecesSource(store)
    expect(store.has(e0)).toBe(true)
    expect(seeded.has(e0)).toBe(false)
    expect(seeded.has(0)).toBe(true)
    expect(seeded.has(n0)).toBe(true)
    const bits = seeded.haveBitmap()
    const held = [...Array(store.totalChunks).keys()].filter((g) => (bits[g >> 3] & (1 << (g & 7))) !== 0)
    expect(held).toEqual([0, n0].sort((a, b) => a - b))
    expect(seeded.readChunk(n0)).toEqual(file.readChunk(n0))
    expect(() => seeded.readChunk(e0)).toThrow(InvalidArgumentError)
    seeded.close()
    file.close()
  })
})
