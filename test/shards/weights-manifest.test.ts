import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  buildWeightsManifest,
  checkManifest,
  chunkMatches,
  chunkRange,
  computeModelId,
  contentModelId,
  HEADER_PIECE,
  manifestFromJson,
  manifestToJson,
  openGgufModelFrom,
  openStoredModel,
  piecesFor,
  RangedFile,
  WeightsIdMismatchError,
  WeightsStore
} from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 33, item 1: the content id commits to every byte, the header and tokenizer included; a
// store holds checked chunks at the original offsets and refuses reads of what it does not hold.

const dir = mkdtempSync(join(tmpdir(), 'weights-manifest-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const legacy = (path: string): string => {
  const m = openGgufModelFrom(new RangedFile(path))
  try {
    return computeModelId(m)
  } finally {
    m.close()
  }
}

describe('content model id (lsw1)', async () => {
  const m = await buildWeightsManifest(GGUF_PATH, legacy(GGUF_PATH))
  const id = contentModelId(m)

  it('covers the header and every tensor, and is stable', async () => {
    expect(id).toMatch(/^lsw1-[0-9a-f]{64}$/)
    expect(m.pieces[0].name).toBe(HEADER_PIECE)
    expect(m.pieces.length).toBe(1 + 48) // stories260K: 5 blocks × 9 tensors + embeddings, norm, head
    expect(contentModelId(await buildWeightsManifest(GGUF_PATH, m.legacyModelId))).toBe(id)
    expect(() => checkManifest(manifestFromJson(manifestToJson(m)), id)).not.toThrow()
  })

  it('changes when one byte of a tensor, or of the tokenizer, changes', async () => {
    // a letter of a token string in the tokenizer metadata (lengths untouched: the file still parses)
    const original = readFileSync(GGUF_PATH)
    const tokens = original.indexOf('tokenizer.ggml.tokens')
    const inToken = original.indexOf('ing', tokens + 64)
    expect(inToken).toBeGreaterThan(tokens)
    expect(inToken).toBeLessThan(m.pieces[0].sizeBytes)
    for (const [what, at] of [
      ['tensor', m.pieces[5].offsetBytes + 3],
      ['header', inToken]
    ] as const) {
      const copy = join(dir, `flip-${what}.gguf`)
      copyFileSync(GGUF_PATH, copy)
      const bytes = readFileSync(copy)
      bytes[at] ^= 0x40
      writeFileSync(copy, bytes)
      expect(contentModelId(await buildWeightsManifest(copy, m.legacyModelId))).not.toBe(id)
    }
  })

  it('refuses a manifest that does not hash to the id, with a typed error', () => {
    const hashes = Uint8Array.from(m.pieces[3].chunkHashes)
    hashes[0] ^= 1
    const forged = { ...m, pieces: m.pieces.map((p, i) => (i === 3 ? { ...p, chunkHashes: hashes } : p)) }
    expect(() => checkManifest(forged, id)).toThrow(WeightsIdMismatchError)
    expect(() => checkManifest({ ...m, legacyModelId: 'lsm1-other' }, id)).toThrow(/hashes to/)
    try {
      checkManifest({ ...m, pieces: m.pieces.slice(1) }, id)
    } catch (err) {
      expect((err as WeightsIdMismatchError).code).toBe('WEIGHTS_ID_MISMATCH')
    }
  })

  it('checks chunks: the right bytes match, a flipped byte does not', () => {
    const file = new RangedFile(GGUF_PATH)
    const r = chunkRange(m, 7, 0)
    const bytes = file.read(r.offsetBytes, r.sizeBytes, 'chunk')
    file.close()
    expect(chunkMatches(m, 7, 0, bytes)).toBe(true)
    bytes[10] ^= 1
    expect(chunkMatches(m, 7, 0, bytes)).toBe(false)
  })

  it('a store holding a span opens as the GGUF; its blocks read as the file, the rest throws TENSOR_NOT_HELD', () => {
    const modelsDir = join(dir, 'models')
    const store = WeightsStore.open(modelsDir, id, m)
    const src = new RangedFile(GGUF_PATH)
    for (const i of piecesFor(m, { edge: false, blocks: [[1, 3]] })) {
      const g = store.firstChunk[i]
      const r = chunkRange(m, i, 0)
      store.writeChunk(g, src.read(r.offsetBytes, r.sizeBytes, 'chunk'))
    }
    store.close()
    src.close()
    // reopened: what was written and saved is still held (a restart resumes from it)
    const again = WeightsStore.open(modelsDir, id, WeightsStore.savedManifest(modelsDir, id)!)
    expect(again.holdsHeader()).toBe(true)
    const stored = openStoredModel(again)
    const original = openGgufModelFrom(new RangedFile(GGUF_PATH))
    expect(stored.config).toEqual(original.config)
    expect(stored.readMatrix('blk.2.attn_q').data).toEqual(original.readMatrix('blk.2.attn_q').data)
    expect(() => stored.readMatrix('blk.0.attn_q')).toThrow(expect.objectContaining({ code: 'TENSOR_NOT_HELD' }))
    expect(() => stored.readMatrix('token_embd')).toThrow(/not held/)
    stored.close()
    original.close()
    again.close()
  })

  it('a span wants its blocks and small globals; the edge wants embeddings, norm and head too', () => {
    const names = (idx: number[]) => idx.map((i) => m.pieces[i].name)
    const span = names(piecesFor(m, { edge: false, blocks: [[2, 3]] }))
    expect(span[0]).toBe(HEADER_PIECE)
    expect(span.slice(1).every((n) => n.startsWith('blk.2.'))).toBe(true)
    const edge = names(
      piecesFor(m, {
        edge: true,
        blocks: [
          [0, 1],
          [4, 5]
        ]
      })
    )
    expect(edge).toContain('token_embd.weight')
    expect(edge).toContain('output_norm.weight')
    expect(edge.some((n) => n.startsWith('blk.2.'))).toBe(false)
  })

  it('the last span with head: the final norm, the head and the embeddings, not other blocks', () => {
    const names = (idx: number[]) => idx.map((i) => m.pieces[i].name)
    const plain = names(piecesFor(m, { edge: false, blocks: [[4, 5]] }))
    const last = names(piecesFor(m, { edge: false, head: true, blocks: [[4, 5]] }))
    expect(plain).not.toContain('output_norm.weight')
    expect(last).toContain('output_norm.weight')
    expect(last).toContain('token_embd.weight')
    if (m.pieces.some((p) => p.name === 'output.weight')) expect(last).toContain('output.weight')
    expect(last.some((n) => n.startsWith('blk.0.'))).toBe(false)
  })
})
