import type { WeightsManifest } from '../../shards/index.js'

/*
 * Issue #35 item 4 (issue 33 item 4, "less where the head runs on a peer"): a thin client whose
 * head runs on a peer holds only some head rows: its secret sample, from which the context rows
 * it can check are drawn too. The weights protocol's unit is a 1 MiB chunk checked against the
 * content id (a row's bytes alone could not be checked), so the client fetches whole chunks: a
 * secret random choice of the head's chunks holding at least `secretRows` rows, and draws its
 * secret rows from the rows wholly inside them (docs/weights.md "The thin client").
 */

export interface HeadChunks {
  /** Global chunk numbers to fetch. */
  readonly chunks: ReadonlySet<number>
  /** Chunks of the head piece in all. */
  readonly pieceChunks: number
  /** Whether row `id` lies wholly inside the chosen chunks. */
  readonly readable: (id: number) => boolean
}

/** A secret random choice of the chunks of head piece `piece` ([vocab] rows) holding ≥ secretRows rows. */
export function pickHeadChunks(
  m: WeightsManifest,
  firstChunk: readonly number[],
  piece: number,
  vocab: number,
  secretRows: number
): HeadChunks {
  const p = m.pieces[piece]
  const rowBytes = p.sizeBytes / vocab
  const cb = m.chunkBytes
  const n = Math.max(1, Math.ceil(p.sizeBytes / cb))
  // rows wholly inside chunk c (a row across two chosen chunks is readable too, not counted here)
  const rowsIn = (c: number) =>
    Math.max(0, Math.floor(Math.min((c + 1) * cb, p.sizeBytes) / rowBytes) - Math.ceil((c * cb) / rowBytes))
  // a Fisher-Yates shuffle with Web Crypto: which chunks (so which rows) is the client's secret
  const order = Array.from({ length: n }, (_, c) => c)
  const draw = new Uint32Array(n)
  globalThis.crypto.getRandomValues(draw)
  for (let i = n - 1; i > 0; i--) {
    const j = draw[i] % (i + 1)
    ;[order[i], order[j]] = [order[j], order[i]]
  }
  const local = new Set<number>()
  let rows = 0
  for (const c of order) {
    if (rows >= Math.min(secretRows, vocab)) break
    local.add(c)
    rows += rowsIn(c)
  }
  const readable = (id: number): boolean => {
    if (!Number.isInteger(id) || id < 0 || id >= vocab) return false
    const from = Math.floor((id * rowBytes) / cb)
    const to = Math.floor(((id + 1) * rowBytes - 1) / cb)
    for (let c = from; c <= to; c++) if (!local.has(c)) return false
    return true
  }
  return { chunks: new Set([...local].map((c) => firstChunk[piece] + c)), pieceChunks: n, readable }
}
