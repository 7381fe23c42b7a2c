import { createHash } from 'node:crypto'
import { open } from 'node:fs/promises'
import { WeightsIdMismatchError } from '../errors.js'
import { RangedFile } from './file-reader.js'
import { readGgufHeader } from './gguf-reader.js'

/*
 * Issue 33, item 1: a content model id that commits to every byte a peer may serve. The file is
 * cut into pieces (the GGUF header, which holds the metadata and the tokenizer, then each tensor
 * in file order); each piece into chunks of WEIGHTS_CHUNK_BYTES; each chunk is hashed (SHA-256).
 * A piece's leaf hash covers its name, place, size and chunk hashes; the id is the SHA-256 over
 * the file size, the chunk size, today's model id (lsm1-…) and every leaf, in order. A fetcher
 * that has the manifest checks it against the id the user typed, then each chunk against its
 * hash, so no byte from a peer is used unchecked.
 */

/** Bytes per chunk: the unit a peer serves and a fetcher checks (1 MiB). */
export const WEIGHTS_CHUNK_BYTES = 1 << 20

/** The name of the piece that holds the GGUF header (metadata, tokenizer, tensor table). */
export const HEADER_PIECE = 'gguf-header'

const ID_PREFIX = 'lsw1-'
const DOMAIN = 'layerswarm-weights-v1'

export interface WeightsPiece {
  readonly name: string
  readonly offsetBytes: number
  readonly sizeBytes: number
  /** SHA-256 of each chunk, 32 bytes each, concatenated. */
  readonly chunkHashes: Uint8Array
}

export interface WeightsManifest {
  readonly fileBytes: number
  readonly chunkBytes: number
  /** Today's sampled model id (shards/model/model-id.ts): what nodes announce and receipts bind. */
  readonly legacyModelId: string
  readonly pieces: readonly WeightsPiece[]
}

/** Chunks of a piece of `sizeBytes`. */
export function chunkCount(sizeBytes: number, chunkBytes: number): number {
  return Math.max(1, Math.ceil(sizeBytes / chunkBytes))
}

/** Where each piece's chunks start in the global chunk numbering, and the total. */
export function chunkLayout(m: WeightsManifest): { firstChunk: number[]; totalChunks: number } {
  const firstChunk: number[] = []
  let n = 0
  for (const p of m.pieces) {
    firstChunk.push(n)
    n += chunkCount(p.sizeBytes, m.chunkBytes)
  }
  return { firstChunk, totalChunks: n }
}

/** The file range of one chunk of a piece. */
export function chunkRange(m: WeightsManifest, piece: number, chunk: number): { offsetBytes: number; sizeBytes: number } {
  const p = m.pieces[piece]
  const start = chunk * m.chunkBytes
  return { offsetBytes: p.offsetBytes + start, sizeBytes: Math.min(m.chunkBytes, p.sizeBytes - start) }
}

const u64 = (n: number): Buffer => {
  const b = Buffer.alloc(8)
  b.writeBigUInt64LE(BigInt(n))
  return b
}
const str = (s: string): Buffer => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s, 'utf8')])

/** A piece's leaf: name, offset, size and its chunk hashes. */
export function pieceLeaf(p: WeightsPiece): Uint8Array {
  return createHash('sha256')
    .update(str(p.name))
    .update(u64(p.offsetBytes))
    .update(u64(p.sizeBytes))
    .update(p.chunkHashes)
    .digest()
}

/** The content id of a manifest: `lsw1-` and 64 hex digits. */
export function contentModelId(m: WeightsManifest): string {
  const h = createHash('sha256')
    .update(str(DOMAIN))
    .update(u64(m.fileBytes))
    .update(u64(m.chunkBytes))
    .update(str(m.legacyModelId))
  h.update(u64(m.pieces.length))
  for (const p of m.pieces) h.update(pieceLeaf(p))
  return `${ID_PREFIX}${h.digest('hex')}`
}

/** Is `id` shaped as a content id? */
export function isContentModelId(id: string): boolean {
  return /^lsw1-[0-9a-f]{64}$/.test(id)
}

/**
 * Check a manifest a peer sent: its pieces well formed (in order, inside the file, one hash per
 * chunk) and its id the one asked for. Throws WeightsIdMismatchError otherwise.
 */
export function checkManifest(m: WeightsManifest, id: string): void {
  if (m.chunkBytes < 4096 || m.chunkBytes > 16 << 20) throw new WeightsIdMismatchError(`chunk size ${m.chunkBytes} out of range`)
  if (m.pieces.length === 0 || m.pieces[0].name !== HEADER_PIECE || m.pieces[0].offsetBytes !== 0)
    throw new WeightsIdMismatchError('the manifest does not start with the GGUF header piece')
  let end = 0
  for (const p of m.pieces) {
    if (p.offsetBytes < end || p.offsetBytes + p.sizeBytes > m.fileBytes)
      throw new WeightsIdMismatchError(`piece ${p.name} overlaps another or lies outside the file`)
    if (p.chunkHashes.length !== 32 * chunkCount(p.sizeBytes, m.chunkBytes))
      throw new WeightsIdMismatchError(`piece ${p.name} has ${p.chunkHashes.length / 32} chunk hashes for ${p.sizeBytes} bytes`)
    end = p.offsetBytes + p.sizeBytes
  }
  const got = contentModelId(m)
  if (got !== id) throw new WeightsIdMismatchError(`the manifest hashes to ${got}, not the ${id} asked for`)
}

/** Does `bytes` hash to chunk `chunk` of piece `piece`? */
export function chunkMatches(m: WeightsManifest, piece: number, chunk: number, bytes: Uint8Array): boolean {
  const want = m.pieces[piece].chunkHashes.subarray(chunk * 32, chunk * 32 + 32)
  const got = createHash('sha256').update(bytes).digest()
  return Buffer.compare(got, want) === 0
}

export interface ManifestOptions {
  readonly onProgress?: (doneBytes: number, totalBytes: number) => void
  readonly signal?: AbortSignal
}

/**
 * Hash a GGUF file into its manifest (reads the whole file once, a chunk at a time, off the
 * event loop's critical path between chunks). `legacyModelId` is computeModelId of the same file.
 */
export async function buildWeightsManifest(
  path: string,
  legacyModelId: string,
  { onProgress, signal }: ManifestOptions = {}
): Promise<WeightsManifest> {
  const file = new RangedFile(path)
  let header: ReturnType<typeof readGgufHeader>
  try {
    header = readGgufHeader(file)
  } finally {
    file.close()
  }
  const tensors = [...header.tensors.values()].sort((a, b) => a.offset - b.offset)
  const ranges = [
    { name: HEADER_PIECE, offsetBytes: 0, sizeBytes: header.dataOffset },
    ...tensors.map((t) => ({ name: t.name, offsetBytes: t.offset, sizeBytes: t.sizeBytes }))
  ]
  const fh = await open(path, 'r')
  try {
    const fileBytes = (await fh.stat()).size
    const total = ranges.reduce((s, r) => s + r.sizeBytes, 0)
    const buf = Buffer.alloc(WEIGHTS_CHUNK_BYTES)
    let done = 0
    const pieces: WeightsPiece[] = []
    for (const r of ranges) {
      const n = chunkCount(r.sizeBytes, WEIGHTS_CHUNK_BYTES)
      const hashes = new Uint8Array(32 * n)
      for (let c = 0; c < n; c++) {
        const len = Math.min(WEIGHTS_CHUNK_BYTES, r.sizeBytes - c * WEIGHTS_CHUNK_BYTES)
        signal?.throwIfAborted()
        const { bytesRead } = await fh.read(buf, 0, len, r.offsetBytes + c * WEIGHTS_CHUNK_BYTES)
        if (bytesRead !== len) throw new WeightsIdMismatchError(`${path}: short read in ${r.name}`)
        hashes.set(createHash('sha256').update(buf.subarray(0, len)).digest(), c * 32)
        done += len
        onProgress?.(done, total)
      }
      pieces.push({ ...r, chunkHashes: hashes })
    }
    return { fileBytes, chunkBytes: WEIGHTS_CHUNK_BYTES, legacyModelId, pieces }
  } finally {
    await fh.close()
  }
}

/** The manifest as JSON (hashes in hex), for the store's manifest.json. */
export function manifestToJson(m: WeightsManifest): string {
  return JSON.stringify({
    ...m,
    pieces: m.pieces.map((p) => ({ ...p, chunkHashes: Buffer.from(p.chunkHashes).toString('hex') }))
  })
}

/** The inverse of manifestToJson (the caller checks the id with checkManifest). */
export function manifestFromJson(text: string): WeightsManifest {
  const j = JSON.parse(text) as Omit<WeightsManifest, 'pieces'> & {
    pieces: Array<Omit<WeightsPiece, 'chunkHashes'> & { chunkHashes: string }>
  }
  return { ...j, pieces: j.pieces.map((p) => ({ ...p, chunkHashes: new Uint8Array(Buffer.from(p.chunkHashes, 'hex')) })) }
}
