import { TensorNotHeldError } from '../errors.js'
import type { ModelFile } from '../model-file.js'
import type { TensorName } from '../types.js'
import { openGgufModel } from './gguf-model.js'
import { HEADER_PIECE, type WeightsManifest } from './weights-manifest.js'
import type { WeightsStore } from './weights-store.js'

/*
 * Issue 33: which pieces of a model a node or a client needs. A node serving blocks [a, b) needs
 * the header, its blocks and the small globals a block reads (rope_freqs); the client's edge needs
 * the header, the embeddings, the final norm, the head and its edge blocks.
 */

/** The edge tensors that are not blocks' (embeddings, head, final norm). */
const EDGE_GLOBALS = new Set(['token_embd.weight', 'output.weight', 'output_norm.weight'])

function blockOf(name: string): number | undefined {
  const m = /^blk\.(\d+)\./.exec(name)
  return m ? Number(m[1]) : undefined
}

/** What to fetch: the blocks wanted, and whether the edge's globals are. */
export interface PieceWant {
  readonly blocks: ReadonlyArray<readonly [number, number]>
  readonly edge: boolean
  /** With `edge`, the untied head too (default); false: a client whose head runs on a peer (issue #35 item 4). */
  readonly head?: boolean
}

/** Indices of the manifest's pieces a want needs (the header first). */
export function piecesFor(m: WeightsManifest, want: PieceWant): number[] {
  const out: number[] = []
  for (const [i, p] of m.pieces.entries()) {
    const b = p.name === HEADER_PIECE ? undefined : blockOf(p.name)
    if (p.name === HEADER_PIECE) out.push(i)
    else if (b === undefined) {
      if (p.name === 'output.weight' && want.head === false) continue
      if (want.edge || !EDGE_GLOBALS.has(p.name)) out.push(i)
    } else if (want.blocks.some(([s, e]) => b >= s && b < e)) out.push(i)
  }
  return out
}

/** The bytes of the pieces `indices`. */
export function piecesBytes(m: WeightsManifest, indices: readonly number[]): number {
  return indices.reduce((s, i) => s + m.pieces[i].sizeBytes, 0)
}

/**
 * The store's model.gguf opened as any GGUF: reading a tensor the store does not wholly hold
 * throws TensorNotHeldError (its bytes would be the file's holes, zeros). The sampled model id
 * (computeModelId) needs every tensor, so a partial store's id comes from the manifest.
 */
export function openStoredModel(store: WeightsStore): ModelFile {
  const model = openGgufModel(store.path)
  const held = new Set<string>()
  store.manifest.pieces.forEach((p, i) => {
    if (store.holdsPiece(i)) held.add(p.name)
  })
  const guard = <T>(name: TensorName, read: () => T): T => {
    if (!held.has(`${name}.weight`) && !held.has(name))
      throw new TensorNotHeldError(`${name} is not held by ${store.dir} (fetch its span first)`)
    return read()
  }
  // issue #35 item 4: a thin client with its head on a peer holds only the chunks of some head rows
  const readRows = (name: TensorName, first: number, count: number) => {
    const key = name === 'output' && model.config.tiedEmbeddings ? 'token_embd.weight' : `${name}.weight`
    const i = store.manifest.pieces.findIndex((p) => p.name === key)
    const info = model.matrixInfo?.(name)
    if (i < 0 || !info) return guard(name, () => model.readMatrixRows!(name, first, count))
    const rowBytes = store.manifest.pieces[i].sizeBytes / info.rows
    const { chunkBytes } = store.manifest
    const from = Math.floor((first * rowBytes) / chunkBytes)
    const to = Math.floor(((first + count) * rowBytes - 1) / chunkBytes)
    for (let c = from; c <= to; c++)
      if (!store.has(store.firstChunk[i] + c))
        throw new TensorNotHeldError(`rows [${first}, ${first + count}) of ${name} are not held by ${store.dir}`)
    return model.readMatrixRows!(name, first, count)
  }
  return {
    format: model.format,
    path: model.path,
    config: model.config,
    vocabulary: model.vocabulary,
    metadata: model.metadata,
    weightDType: model.weightDType,
    hasTensor: (name) => model.hasTensor(name),
    readMatrix: (name) => guard(name, () => model.readMatrix(name)),
    ...(model.matrixInfo ? { matrixInfo: (name: TensorName) => model.matrixInfo!(name) } : {}),
    ...(model.readMatrixInto
      ? { readMatrixInto: (name: TensorName, into: Uint8Array) => guard(name, () => model.readMatrixInto!(name, into)) }
      : {}),
    ...(model.readMatrixRows
      ? { readMatrixRows: (name: TensorName, first: number, count: number) => readRows(name, first, count) }
      : {}),
    readVector: (name) => guard(name, () => model.readVector(name)),
    sampleTensor: (name, maxBytes) => guard(name, () => model.sampleTensor(name, maxBytes)),
    bytesRead: () => model.bytesRead(),
    close: () => model.close()
  }
}
