/**
 * The client's low-dimensional head (issue #35): a few rows of the LM head (the tokens of its
 * own language and context, and a secret random sample) that it evaluates itself on the last
 * hop's hidden output, to fuse with and check the head peer's top-k. Beside each logit it gives
 * a bound on how far an honest head may differ from it: the hidden travelled quantised
 * (`checkDtype`), and the peer's fast matmul quantises its normed input per block (q8_0 / q8_K),
 * so each logit may move by about Σ_j |w_ij| · (step of element j), which this sums.
 */
import { InvalidArgumentError } from '../errors.js'
import { softcap } from '../family-block.js'
import { createReferenceKernels } from '../kernels/kernels-ref.js'
import type { ModelFile } from '../model/model-file.js'
import { dequantizeRow } from '../quant/codecs.js'
import type { ModelConfig, WeightMatrix } from '../types.js'

export type CheckDType = 'f32' | 'f16' | 'q8_0'

/** Logits of the rows the client holds for one hidden row, with each one's honest-error bound. */
export interface LocalHeadRow {
  readonly ids: readonly number[]
  readonly logits: Float32Array
  /** σ of an honest head's difference from each logit (see above); NaN where not asked. */
  readonly sigmas: Float32Array
}

/** Relative step of one element as each check dtype carries it (q8_0: of its 32-block's largest). */
const STEP: Record<CheckDType, number> = { f32: 2 ** -23, f16: 2 ** -10, q8_0: 1 / 127 }

export interface HeadRowsOptions {
  /**
   * Rows the model can give (a thin client holds only the chunks of its secret rows, issue #35
   * item 4): context rows outside it are left out; every row by default.
   */
  readonly readable?: (id: number) => boolean
}

export class HeadRows {
  readonly config: ModelConfig
  /** Stored bytes of the head read so far (the rows alone where the model reads rows). */
  storedBytesRead = 0
  private readonly model: ModelFile
  private readonly name: 'output' | 'token_embd'
  // only for a model that cannot read single rows (memory / llama2.c): the whole head, once
  private matrix?: WeightMatrix
  private readonly readable?: (id: number) => boolean
  private readonly norm: Float32Array
  private readonly index = new Map<number, number>()
  private readonly order: number[] = []
  private rows = new Float32Array(0)
  private readonly kernels = createReferenceKernels()

  constructor(model: ModelFile, options: HeadRowsOptions = {}) {
    this.config = model.config
    this.model = model
    this.readable = options.readable
    this.norm = model.readVector('output_norm')
    this.name = this.config.tiedEmbeddings ? 'token_embd' : 'output'
  }

  private readRow(id: number, out: Float32Array): void {
    if (this.model.readMatrixRows) {
      const row = this.model.readMatrixRows(this.name, id, 1)
      this.storedBytesRead += row.data.byteLength
      dequantizeRow(row, 0, out)
      return
    }
    if (!this.matrix) {
      this.matrix = this.model.readMatrix(this.name)
      this.storedBytesRead += this.matrix.data.byteLength
    }
    dequantizeRow(this.matrix, id, out)
  }

  /** Row ids held, in the order added. */
  get ids(): readonly number[] {
    return this.order
  }

  /** Bytes of the rows held (f32). */
  get bytes(): number {
    return this.order.length * this.config.dim * 4
  }

  has(id: number): boolean {
    return this.index.has(id)
  }

  /** Hold these rows too (ids already held, and ids the model cannot give, are skipped). */
  add(ids: Iterable<number>): void {
    const dim = this.config.dim
    const asked = [...new Set(ids)].filter((id) => !this.index.has(id))
    for (const id of asked) {
      if (!Number.isInteger(id) || id < 0 || id >= this.config.vocabSize)
        throw new InvalidArgumentError(`head row ${id} is outside the vocabulary of ${this.config.vocabSize}`)
    }
    const fresh = asked.filter((id) => this.readable?.(id) ?? true)
    if (fresh.length === 0) return
    const need = (this.order.length + fresh.length) * dim
    if (this.rows.length < need) {
      const grown = new Float32Array(Math.max(need, this.rows.length * 2))
      grown.set(this.rows)
      this.rows = grown
    }
    for (const id of fresh) {
      this.index.set(id, this.order.length)
      this.readRow(id, this.rows.subarray(this.order.length * dim, (this.order.length + 1) * dim))
      this.order.push(id)
    }
  }

  /**
   * The held rows' logits for one hidden row (the last hop's output, as it travelled in `dtype`),
   * with σ for the rows `need` names (every row by default): logits above `above`, or `ids`.
   */
  evaluate(hidden: Float32Array, dtype: CheckDType, need?: { above?: number; ids?: ReadonlySet<number> }): LocalHeadRow {
    const { dim, rmsEps } = this.config
    if (hidden.length !== dim) throw new InvalidArgumentError(`a head check needs one row of ${dim}, got ${hidden.length}`)
    const normed = new Float32Array(dim)
    this.kernels.rmsnorm(normed, hidden, this.norm, 1, rmsEps)
    let ss = 0
    for (let j = 0; j < dim; j++) ss += hidden[j] * hidden[j]
    const invRms = 1 / Math.sqrt(ss / dim + rmsEps)
    // variance of element j's rounding: the wire's (a step of its 32-block of the hidden, in the
    // normed space) and the peer's activation quantisation (a step of its 256-block of the normed
    // input, q8_K's block; q8_0's 32-block is inside it), each uniform: step² / 12
    const variance = new Float64Array(dim)
    for (let b = 0; b < dim; b += 32) {
      let amax = 0
      for (let j = b; j < Math.min(dim, b + 32); j++) amax = Math.max(amax, Math.abs(hidden[j]))
      for (let j = b; j < Math.min(dim, b + 32); j++) {
        const wire = (dtype === 'q8_0' ? amax * STEP.q8_0 : Math.abs(hidden[j]) * STEP[dtype]) * invRms * Math.abs(this.norm[j])
        variance[j] = (wire * wire) / 12
      }
    }
    for (let b = 0; b < dim; b += 256) {
      let amax = 0
      for (let j = b; j < Math.min(dim, b + 256); j++) amax = Math.max(amax, Math.abs(normed[j]))
      const act = amax / 127
      for (let j = b; j < Math.min(dim, b + 256); j++) variance[j] += (act * act) / 12
    }
    const n = this.order.length
    const logits = new Float32Array(n)
    for (let r = 0; r < n; r++) {
      const w = this.rows.subarray(r * dim, (r + 1) * dim)
      let dot = 0
      for (let j = 0; j < dim; j++) dot += w[j] * normed[j]
      logits[r] = dot
    }
    softcap(logits, this.config.family?.finalSoftcap ?? 0)
    // σ only where a comparison needs it (about half the cost of the dots otherwise): NaN elsewhere
    const sigmas = new Float32Array(n).fill(Number.NaN)
    for (let r = 0; r < n; r++) {
      if (!(logits[r] > (need?.above ?? Number.NEGATIVE_INFINITY) || need?.ids?.has(this.order[r]))) continue
      const w = this.rows.subarray(r * dim, (r + 1) * dim)
      let v = 0
      for (let j = 0; j < dim; j++) v += w[j] * w[j] * variance[j]
      sigmas[r] = Math.sqrt(v)
    }
    return { ids: [...this.order], logits, sigmas }
  }
}
