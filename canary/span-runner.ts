import { createShard, type Kernels, type KvDType, type ModelFile, type Shard } from '../shards/index.js'
import { CanaryArgumentError } from './errors.js'

/**
 * Runs blocks [start, maxEnd) of a model as one-block sessions chained in order, so a single
 * pass yields the output after every block: the output of span [start, e) for every e. This
 * is the same arithmetic a peer serving [start, e) performs (its shard runs the same blocks
 * one after another on the same rows), so one pass serves every span end.
 */
export interface SpanRunner {
  readonly start: number
  readonly maxEnd: number
  readonly dim: number
  /**
   * Run a session over `inputs` [L, dim] as steps of `steps[i]` rows (prefill, then decode
   * steps; the counts add up to L) and return the outputs [L, dim] after each end in `ends`.
   */
  run(inputs: Float32Array, steps: readonly number[], ends: readonly number[]): Float32Array[]
  close(): void
}

export interface SpanRunnerInit {
  readonly model: ModelFile
  readonly kernels?: Kernels
  readonly start: number
  readonly maxEnd: number
  readonly kvDType?: KvDType
}

let sessionCounter = 0

export function createSpanRunner(init: SpanRunnerInit): SpanRunner {
  const { model, start, maxEnd } = init
  const shard: Shard = createShard({ model, start, end: maxEnd, kernels: init.kernels, kvDType: init.kvDType })
  const dim = model.config.dim
  return {
    start,
    maxEnd,
    dim,
    run(inputs, steps, ends) {
      if (!(inputs instanceof Float32Array) || inputs.length === 0 || inputs.length % dim !== 0) {
        throw new CanaryArgumentError(`inputs must be whole rows of ${dim} floats`)
      }
      const L = inputs.length / dim
      if (!steps.every((s) => Number.isInteger(s) && s > 0) || steps.reduce((a, b) => a + b, 0) !== L) {
        throw new CanaryArgumentError(`step row counts must be positive and add up to ${L}`)
      }
      for (const e of ends) {
        if (!Number.isInteger(e) || e <= start || e > maxEnd)
          throw new CanaryArgumentError(`span end ${e} is outside (${start}, ${maxEnd}]`)
      }
      const outs = ends.map(() => new Float32Array(L * dim))
      const id = `canary-run-${++sessionCounter}`
      for (let l = start; l < maxEnd; l++) shard.openSession(`${id}-${l}`, { maxLength: L, start: l, end: l + 1 })
      try {
        let pos = 0
        for (const rows of steps) {
          let x = inputs.subarray(pos * dim, (pos + rows) * dim)
          for (let l = start; l < maxEnd; l++) {
            x = shard.forward(`${id}-${l}`, x, pos)
            const k = ends.indexOf(l + 1)
            if (k >= 0) outs[k].set(x, pos * dim)
          }
          pos += rows
        }
      } finally {
        for (let l = start; l < maxEnd; l++) shard.closeSession(`${id}-${l}`)
      }
      return outs
    },
    close() {
      shard.close()
    }
  }
}
