import { loadMatrices } from './block.js'
import { InvalidArgumentError } from './errors.js'
import { softcap } from './family-block.js'
import type { Kernels } from './kernels/kernels.js'
import { createReferenceKernels } from './kernels/kernels-ref.js'
import type { ModelFile } from './model/model-file.js'
import { dequantizeRow } from './quant/codecs.js'
import type { ModelConfig, WeightMatrix } from './types.js'

export interface EdgeInit {
  readonly model: ModelFile
  readonly kernels?: Kernels
  /**
   * Read an untied head only on the first logits call (issue #35 item 4): a client whose head runs
   * on a peer then never holds it. Default false: read at once, so the first token pays no load.
   */
  readonly lazyHead?: boolean
}

/**
 * The parts of the model that see tokens: the embedding lookup before the first block and the
 * final RMSNorm + LM head after the last. They stay on the client so no peer sees token ids.
 */
export class Edge {
  readonly config: ModelConfig
  readonly kernels: Kernels
  private readonly embedding: WeightMatrix // [vocab, dim]
  private readonly outputNorm: Float32Array // [dim]
  // [vocab, dim]; with lazyHead an untied head is read on the first logits call
  private loadedHead?: WeightMatrix
  private readonly model: ModelFile
  private normed = new Float32Array(0)
  private last = new Float32Array(0)

  constructor(init: EdgeInit) {
    const { model } = init
    this.config = model.config
    this.model = model
    this.kernels = init.kernels ?? createReferenceKernels()
    this.outputNorm = model.readVector('output_norm')
    if (this.config.tiedEmbeddings) {
      // A tied head is the embedding matrix itself: read it once, prepare it for the kernels and
      // look embeddings up in the prepared copy, so the file copy can be dropped (one copy resident).
      this.loadedHead = loadMatrices(model, ['token_embd'], this.kernels, undefined, { keepRows: true })
      this.embedding = this.loadedHead
    } else {
      this.embedding = model.readMatrix('token_embd')
      if (!init.lazyHead) this.loadedHead = loadMatrices(model, ['output'], this.kernels)
    }
  }

  private get head(): WeightMatrix {
    this.loadedHead ??= loadMatrices(this.model, ['output'], this.kernels)
    return this.loadedHead
  }

  /** Bytes of the LM head matrix held (0 until a logits call reads an untied head). */
  get headBytes(): number {
    return this.loadedHead?.data.byteLength ?? 0
  }

  /** Bytes of weights the edge holds (embedding, head unless tied or not read yet, final norm). */
  get weightBytes(): number {
    const head = this.loadedHead === undefined || this.loadedHead === this.embedding ? 0 : this.loadedHead.data.byteLength
    return this.embedding.data.byteLength + head + this.outputNorm.length * 4
  }

  /** Hidden states [T, dim] for tokens. */
  embed(tokens: readonly number[]): Float32Array {
    const { dim, vocabSize } = this.config
    const out = new Float32Array(tokens.length * dim)
    tokens.forEach((tok, t) => {
      if (!Number.isInteger(tok) || tok < 0 || tok >= vocabSize) {
        throw new InvalidArgumentError(`token id ${tok} is outside the vocabulary of ${vocabSize}`)
      }
      dequantizeRow(this.embedding, tok, out.subarray(t * dim, (t + 1) * dim))
    })
    // Gemma: ggml_scale(inpL, sqrtf(n_embd)), one float32 product per element.
    const scale = this.config.family?.embedScale ?? 1
    if (scale !== 1) for (let i = 0; i < out.length; i++) out[i] = Math.fround(out[i] * scale)
    return out
  }

  /** Logits [T, vocab] for hidden states [T, dim]: final RMSNorm, then the LM head. */
  logits(hidden: Float32Array, T: number): Float32Array {
    const { dim, vocabSize, rmsEps } = this.config
    if (hidden.length < T * dim) throw new InvalidArgumentError(`hidden holds ${hidden.length} floats, need ${T * dim}`)
    if (this.normed.length < T * dim) this.normed = new Float32Array(T * dim)
    this.kernels.rmsnorm(this.normed, hidden, this.outputNorm, T, rmsEps)
    const out = new Float32Array(T * vocabSize)
    this.kernels.matmul(out, this.normed, this.head, T)
    softcap(out, this.config.family?.finalSoftcap ?? 0)
    return out
  }

  /**
   * Logits [vocab] of the last of T rows only (what decoding samples from). The array is the
   * edge's own and is overwritten by the next lastLogits call (copy it to keep it): a decode
   * loop then allocates nothing per token, where a fresh vocab-sized array per token would
   * pile up tens of MB of garbage between collections.
   */
  lastLogits(hidden: Float32Array, T: number): Float32Array {
    const { dim, vocabSize, rmsEps } = this.config
    if (T < 1 || hidden.length < T * dim) throw new InvalidArgumentError(`hidden holds ${hidden.length} floats, need ${T * dim}`)
    if (this.normed.length < dim) this.normed = new Float32Array(dim)
    if (this.last.length !== vocabSize) this.last = new Float32Array(vocabSize)
    this.kernels.rmsnorm(this.normed, hidden.subarray((T - 1) * dim, T * dim), this.outputNorm, 1, rmsEps)
    this.kernels.matmul(this.last, this.normed, this.head, 1)
    softcap(this.last, this.config.family?.finalSoftcap ?? 0)
    return this.last
  }
}

/** The edge parts of a model: embeddings, final norm and LM head (read from the file, nothing else). */
export function createEdge(init: EdgeInit): Edge {
  return new Edge(init)
}
