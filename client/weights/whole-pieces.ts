import { chunkCount, InvalidArgumentError, locateChunk, type WeightsSource, type WeightsStore } from '../../shards/index.js'

/*
 * Issue 33: what a client seeds of its store. Only the pieces it holds whole: a piece held in
 * part is a secret choice (with the head on a peer, the head's chunks hold the client's secret
 * check rows, client/weights/head-chunks.ts), and a `have` bitmap showing those chunks would tell
 * any peer, the head peer included, which rows the client checks it with.
 */

export function wholePiecesSource(store: WeightsStore): WeightsSource {
  const m = store.manifest
  const bitmap = new Uint8Array(Math.ceil(store.totalChunks / 8))
  const whole = m.pieces.map((_, i) => store.holdsPiece(i))
  for (const [i, p] of m.pieces.entries()) {
    if (!whole[i]) continue
    for (let c = 0; c < chunkCount(p.sizeBytes, m.chunkBytes); c++) {
      const g = store.firstChunk[i] + c
      bitmap[g >> 3] |= 1 << (g & 7)
    }
  }
  const has = (g: number): boolean => g >= 0 && g < store.totalChunks && (bitmap[g >> 3] & (1 << (g & 7))) !== 0
  return {
    id: store.id,
    manifest: m,
    haveBitmap: () => bitmap,
    has,
    readChunk: (g) => {
      // a chunk of a piece held in part is refused as not held (NOT_HELD), like any other
      if (!has(g))
        throw new InvalidArgumentError(`chunk ${g} (${m.pieces[locateChunk(m, store.firstChunk, g).piece].name}) is not seeded`)
      return store.readChunk(g)
    },
    close: () => store.close()
  }
}
