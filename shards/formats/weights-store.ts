import {
  closeSync,
  existsSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
  writeSync
} from 'node:fs'
import { join } from 'node:path'
import { InvalidArgumentError } from '../errors.js'
import { RangedFile } from './file-reader.js'
import {
  checkManifest,
  chunkCount,
  chunkLayout,
  chunkRange,
  HEADER_PIECE,
  manifestFromJson,
  manifestToJson,
  type WeightsManifest
} from './weights-manifest.js'

/*
 * Issue 33, item 2: what a node holds of a model, fetched or whole. A store is a folder
 * `$LAYERSWARM_HOME/models/<lsw1-id>/` with `manifest.json`, `model.gguf` and `have.bin`.
 * model.gguf keeps the original file's layout at full size, written only where chunks were
 * fetched (a sparse file: the holes take no disk on ext4, xfs, apfs, ntfs), so the engine opens it
 * as the original GGUF and a seeder serves it at the original offsets. have.bin is one bit per
 * chunk, set only after the chunk was checked against the manifest and written, and saved by
 * rename, so a killed fetch resumes from it.
 */

/** What a seeder serves from: a whole file or a store. */
export interface WeightsSource {
  readonly id: string
  readonly manifest: WeightsManifest
  /** Held chunks, one bit per chunk in global order (bit i of byte i >> 3, LSB first). */
  haveBitmap(): Uint8Array
  has(globalChunk: number): boolean
  /** The bytes of a held chunk. */
  readChunk(globalChunk: number): Uint8Array
  close(): void
}

/** Global chunk → (piece, chunk within it). */
export function locateChunk(m: WeightsManifest, firstChunk: readonly number[], g: number): { piece: number; chunk: number } {
  let lo = 0
  let hi = firstChunk.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (firstChunk[mid] <= g) lo = mid
    else hi = mid - 1
  }
  const chunk = g - firstChunk[lo]
  if (g < 0 || chunk >= chunkCount(m.pieces[lo].sizeBytes, m.chunkBytes)) throw new InvalidArgumentError(`no chunk ${g}`)
  return { piece: lo, chunk }
}

/** Serve a whole local file (a node started with --model). */
export function fileSource(path: string, id: string, manifest: WeightsManifest): WeightsSource {
  const file = new RangedFile(path)
  const { firstChunk, totalChunks } = chunkLayout(manifest)
  const all = new Uint8Array(Math.ceil(totalChunks / 8)).fill(0xff)
  return {
    id,
    manifest,
    haveBitmap: () => all,
    has: (g) => g >= 0 && g < totalChunks,
    readChunk: (g) => {
      const { piece, chunk } = locateChunk(manifest, firstChunk, g)
      const r = chunkRange(manifest, piece, chunk)
      return file.read(r.offsetBytes, r.sizeBytes, `chunk ${g}`)
    },
    close: () => file.close()
  }
}

/** A partly or wholly fetched model under a models folder. */
export class WeightsStore implements WeightsSource {
  readonly dir: string
  readonly path: string
  readonly firstChunk: readonly number[]
  readonly totalChunks: number
  private readonly have: Uint8Array
  private fd: number | undefined

  private constructor(
    readonly id: string,
    readonly manifest: WeightsManifest,
    modelsDir: string
  ) {
    this.dir = join(modelsDir, id)
    this.path = join(this.dir, 'model.gguf')
    const layout = chunkLayout(manifest)
    this.firstChunk = layout.firstChunk
    this.totalChunks = layout.totalChunks
    mkdirSync(this.dir, { recursive: true })
    const manifestPath = join(this.dir, 'manifest.json')
    if (!existsSync(manifestPath)) writeFileSync(manifestPath, manifestToJson(manifest))
    this.fd = openSync(this.path, existsSync(this.path) ? 'r+' : 'w+')
    if (fstatSync(this.fd).size !== manifest.fileBytes) ftruncateSync(this.fd, manifest.fileBytes)
    const havePath = join(this.dir, 'have.bin')
    const bytes = Math.ceil(this.totalChunks / 8)
    this.have = new Uint8Array(bytes)
    if (existsSync(havePath)) {
      const saved = readFileSync(havePath)
      if (saved.length === bytes) this.have.set(saved)
    }
  }

  /** The manifest a store already holds (checked against `id` again), or undefined. */
  static savedManifest(modelsDir: string, id: string): WeightsManifest | undefined {
    const p = join(modelsDir, id, 'manifest.json')
    if (!existsSync(p)) return undefined
    const m = manifestFromJson(readFileSync(p, 'utf8'))
    checkManifest(m, id)
    return m
  }

  /** Open (or make) the store of `id` under `modelsDir`; `manifest` must already be checked against `id`. */
  static open(modelsDir: string, id: string, manifest: WeightsManifest): WeightsStore {
    return new WeightsStore(id, manifest, modelsDir)
  }

  haveBitmap(): Uint8Array {
    return this.have
  }

  has(g: number): boolean {
    return g >= 0 && g < this.totalChunks && (this.have[g >> 3] & (1 << (g & 7))) !== 0
  }

  /** Every chunk of piece `i` held? */
  holdsPiece(i: number): boolean {
    const n = chunkCount(this.manifest.pieces[i].sizeBytes, this.manifest.chunkBytes)
    for (let c = 0; c < n; c++) if (!this.has(this.firstChunk[i] + c)) return false
    return true
  }

  /** Bytes of the file held (checked). */
  heldBytes(): number {
    let n = 0
    for (let g = 0; g < this.totalChunks; g++) {
      if (!this.has(g)) continue
      const { piece, chunk } = locateChunk(this.manifest, this.firstChunk, g)
      n += chunkRange(this.manifest, piece, chunk).sizeBytes
    }
    return n
  }

  readChunk(g: number): Uint8Array {
    if (!this.has(g)) throw new InvalidArgumentError(`chunk ${g} is not held`)
    const { piece, chunk } = locateChunk(this.manifest, this.firstChunk, g)
    const r = chunkRange(this.manifest, piece, chunk)
    const file = new RangedFile(this.path)
    try {
      return file.read(r.offsetBytes, r.sizeBytes, `chunk ${g}`)
    } finally {
      file.close()
    }
  }

  /** Write a chunk the caller has checked against the manifest, then mark it held. */
  writeChunk(g: number, bytes: Uint8Array): void {
    if (this.fd === undefined) throw new InvalidArgumentError(`${this.path} is closed`)
    const { piece, chunk } = locateChunk(this.manifest, this.firstChunk, g)
    const r = chunkRange(this.manifest, piece, chunk)
    if (bytes.length !== r.sizeBytes) throw new InvalidArgumentError(`chunk ${g} is ${r.sizeBytes} bytes, got ${bytes.length}`)
    let done = 0
    while (done < bytes.length) done += writeSync(this.fd, bytes, done, bytes.length - done, r.offsetBytes + done)
    this.have[g >> 3] |= 1 << (g & 7)
  }

  /** Save which chunks are held (atomically: a kill leaves the old or the new bitmap). */
  save(): void {
    const p = join(this.dir, 'have.bin')
    writeFileSync(`${p}.tmp`, this.have)
    renameSync(`${p}.tmp`, p)
  }

  /** The header piece held: the file can be opened (config, tokenizer). */
  holdsHeader(): boolean {
    return this.manifest.pieces[0].name === HEADER_PIECE && this.holdsPiece(0)
  }

  close(): void {
    if (this.fd !== undefined) {
      this.save()
      closeSync(this.fd)
    }
    this.fd = undefined
  }
}
