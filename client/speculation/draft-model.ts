import { randomUUID } from 'node:crypto'
import {
  createEdge,
  createSampler,
  createShard,
  type Edge,
  type Kernels,
  type ModelFile,
  openModelFile,
  type SamplerOptions,
  type Shard,
  Xorshift64
} from '../../shards/index.js'
import { DraftModelMismatchError, InvalidSpeculationError } from '../errors.js'
import type { Draft, Drafter } from './draft-ngram.js'
import { sampleFrom, targetProbs } from './speculative-accept.js'

/**
 * A drafter that runs a model on the client: blocks `shards` (in order, each a span of the same
 * model as `edge`) between `edge`'s embedding and head, with its own KV session. Two uses:
 * - self-draft (layer skipping, Zhang et al. 2023 "Draft & Verify"): the client's own edge blocks
 *   and head, skipping every remote block; costs no download and no round trip;
 * - a small draft model with the same tokenizer (`--speculate draft:F`).
 * Greedy drafts are the sampler's choices at temperature 0; with sampling, each draft token is
 * drawn from the draft's distribution (the same sampler transforms), which goes with the draft so
 * the target can apply the speculative sampling rule.
 */
export class ModelDrafter implements Drafter {
  private readonly sessionId = `draft-${randomUUID()}`
  private fed: number[] = []
  private readonly rng: Xorshift64
  private readonly greedy: boolean
  private readonly argmax
  private readonly maxLength: number

  constructor(
    readonly name: string,
    private readonly edge: Edge,
    private readonly shards: readonly Shard[],
    maxLength: number,
    private readonly sampling: SamplerOptions,
    private readonly onClose?: () => void
  ) {
    if (shards.length === 0) throw new InvalidSpeculationError(`the ${name} drafter needs at least one block`)
    for (const s of shards) s.openSession(this.sessionId, { maxLength })
    this.maxLength = maxLength
    this.greedy = (sampling.temperature ?? 1) === 0
    this.argmax = createSampler({ ...sampling, temperature: 0 })
    // its own stream of random numbers, apart from the target's acceptance draws
    this.rng = new Xorshift64((sampling.seed ?? 0) + 0x9e3779b9)
  }

  private forward(tokens: readonly number[], startPos: number): Float32Array {
    let h = this.edge.embed(tokens)
    for (const s of this.shards) h = s.forward(this.sessionId, h, startPos)
    return h
  }

  async draft(context: readonly number[], k: number): Promise<Draft> {
    if (!Number.isInteger(k) || k < 0) throw new InvalidSpeculationError(`draft length must be an integer ≥ 0, got ${k}`)
    // positions up to context.length + k - 2 are run: a draft model with a shorter context stops early
    k = Math.min(k, this.maxLength - context.length + 1)
    if (k <= 0 || context.length === 0) return { tokens: [] }
    // the KV holds `fed`: keep the prefix it shares with the context, rewind the rest
    let common = 0
    while (common < this.fed.length && common < context.length && this.fed[common] === context[common]) common++
    common = Math.min(common, context.length - 1)
    let h = this.forward(context.slice(common), common)
    let rows = context.length - common
    const ctx = [...context]
    const tokens: number[] = []
    const probs: Float64Array[] = []
    for (let i = 0; i < k; i++) {
      const logits = this.edge.lastLogits(h, rows)
      let t: number
      if (this.greedy) t = this.argmax.sample(logits, ctx)
      else {
        const q = targetProbs(logits, ctx, this.sampling)
        t = sampleFrom(q, this.rng)
        probs.push(q)
      }
      tokens.push(t)
      ctx.push(t)
      if (i + 1 < k) {
        h = this.forward([t], ctx.length - 1)
        rows = 1
      }
    }
    this.fed = ctx.slice(0, context.length + k - 1)
    return this.greedy ? { tokens } : { tokens, probs }
  }

  async close(): Promise<void> {
    for (const s of this.shards) s.closeSession(this.sessionId)
    this.onClose?.()
  }
}

/** The client's own edge blocks and head as a drafter (every remote block skipped). */
export function createSelfDrafter(
  edge: Edge,
  first: Shard | undefined,
  last: Shard | undefined,
  maxLength: number,
  sampling: SamplerOptions
): ModelDrafter {
  const shards = [first, last].filter((s): s is Shard => s !== undefined)
  if (shards.length === 0)
    throw new InvalidSpeculationError('speculate "self" needs edge blocks on the client (edgeFirst or edgeLast ≥ 1)')
  return new ModelDrafter('self', edge, shards, maxLength, sampling)
}

/** A small model on the client, loaded once and shared by its generations. */
export class DraftModel {
  readonly model: ModelFile
  readonly edge: Edge
  readonly shard: Shard

  constructor(path: string, target: ModelFile, kernels?: Kernels) {
    this.model = openModelFile(path)
    try {
      const v = this.model.vocabulary
      const w = target.vocabulary
      if (!v || !w || v.pieces.length !== w.pieces.length || v.pieces.some((p, i) => p !== w.pieces[i])) {
        throw new DraftModelMismatchError(`draft model ${path} does not share the target model's tokenizer`)
      }
      if (this.model.config.vocabSize !== target.config.vocabSize)
        throw new DraftModelMismatchError(
          `draft model ${path} has ${this.model.config.vocabSize} logits, the target ${target.config.vocabSize}`
        )
      this.edge = createEdge({ model: this.model, kernels })
      this.shard = createShard({ model: this.model, start: 0, end: this.model.config.nLayers, kernels })
    } catch (err) {
      this.model.close()
      throw err
    }
  }

  drafter(maxLength: number, sampling: SamplerOptions): ModelDrafter {
    return new ModelDrafter('draft', this.edge, [this.shard], Math.min(maxLength, this.model.config.seqLen), sampling)
  }

  close(): void {
    this.model.close()
  }
}
