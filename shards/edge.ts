import { loadMatrices } from './block.js'
import { InvalidArgumentError } from './errors.js'
import type { Kernels } from './kernels/kernels.js'
import { createReferenceKernels } from './kernels/kernels-ref.js'
import type { ModelFile } from './model-file.js'
import { dequantizeRow } from './quant/codecs.js'
import type { ModelConfig, WeightMatrix } from './types.js'

export interface EdgeInit {
  readonly model: ModelFile
  readonly kernels?: Kernels
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
  private readonly head: WeightMatrix // [vocab, dim]
  private normed = new Float32Array(0)
  private last = new Float32Array(0)

  constructor(init: EdgeInit) {
    const { model } = init
    this.config = model.config
    this.kernels = init.kernels ?? createReferenceKernels()
    this.outputNorm = model.readVector('output_norm')
    if (this.config.tiedEmbeddings) {
      // A tied head is the embedding matrix itself: read it once, prepare it for the kernels and
      // look embeddings up in the prepared copy, so the file copy can be dropped (one copy resident).
      this.head = loadMatrices(model, ['token_embd'], this.kernels, undefined, { keepRows: true })
      this.embedding = this.head
    } else {
      this.embedding = model.readMatrix('token_embd')
      this.head = loadMatrices(model, ['output'], this.kernels)
    }
  }

  /** Bytes of the LM head matrix (read in full for every logits row). */
  get headBytes(): number {
    return this.head.data.byteLength
  }

  /** Bytes of weights the edge holds (embedding, head unless tied, final norm). */
  get weightBytes(): number {
    const head = this.head === this.embedding ? 0 : this.head.data.byteLength
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
    return this.last
  }
}

export function createEdge(init: EdgeInit): Edge {
  return new Edge(init)
}
