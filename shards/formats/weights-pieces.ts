import { TensorNotHeldError } from '../errors.js'
import { guardedModel } from '../model/guarded-model.js'
import type { ModelFile } from '../model/model-file.js'
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
  /**
   * The final norm, the head and the embeddings: what the peer of the model's last block needs to
   * answer `--head remote` steps (issue 35). The embeddings because that peer's head runs in an
   * Edge (node/daemon/head-serve.ts), which holds them; a head-only Edge would spare those bytes.
   */
  readonly head?: boolean
  /** With `edge`, leave the untied head out: a client whose head runs on a peer fetches only some rows' chunks (issue #35 item 4). */
  readonly skipHead?: boolean
}

/** Indices of the manifest's pieces a want needs (the header first). */
export function piecesFor(m: WeightsManifest, want: PieceWant): number[] {
  const out: number[] = []
  for (const [i, p] of m.pieces.entries()) {
    const b = p.name === HEADER_PIECE ? undefined : blockOf(p.name)
    if (p.name === HEADER_PIECE) out.push(i)
    else if (b === undefined) {
      if (p.name === 'output.weight' && want.skipHead) continue
      if (want.edge || !EDGE_GLOBALS.has(p.name) || want.head) out.push(i)
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
  const check = (name: TensorName): void => {
    if (!held.has(`${name}.weight`) && !held.has(name))
      throw new TensorNotHeldError(`${name} is not held by ${store.dir} (fetch its span first)`)
  }
  // issue #35 item 4: a thin client with its head on a peer holds only the chunks of some head rows
  const rows = (name: TensorName, first: number, count: number): void => {
    const key = name === 'output' && model.config.tiedEmbeddings ? 'token_embd.weight' : `${name}.weight`
    const i = store.manifest.pieces.findIndex((p) => p.name === key)
    const info = model.matrixInfo?.(name)
    if (i < 0 || !info) {
      check(name)
      return
    }
    const rowBytes = store.manifest.pieces[i].sizeBytes / info.rows
    const { chunkBytes } = store.manifest
    const from = Math.floor((first * rowBytes) / chunkBytes)
    const to = Math.floor(((first + count) * rowBytes - 1) / chunkBytes)
    for (let c = from; c <= to; c++)
      if (!store.has(store.firstChunk[i] + c))
        throw new TensorNotHeldError(`rows [${first}, ${first + count}) of ${name} are not held by ${store.dir}`)
  }
  return guardedModel(model, check, { sampleTensor: true, rows })
}
