import { type Edge, type GenerateInit, generateTokens, type Kernels, type ModelFile, type Shard } from '../../shards/index.js'
import { InvalidSpeculationError } from '../errors.js'
import { createSelfDrafter, DraftModel } from './draft-model.js'
import { createNgramDrafter, type Drafter } from './draft-ngram.js'
import { type SpeculationStats, speculativeTokens } from './speculative-decode.js'
import type { DraftLengthOptions } from './speculative-k.js'

/**
 * How a generation drafts tokens for speculative steps: `off` (one token per step), `ngram`
 * (prompt lookup: n-gram matches in the context, no model), `self` (the client's own edge blocks
 * and head, skipping the remote blocks) or `draft:<file>` (a small model with the same tokenizer).
 */
export type SpeculateMode = 'off' | 'ngram' | 'self' | `draft:${string}`

export const SPECULATE_MODES = ['off', 'ngram', 'self', 'draft:F'] as const

/** Check a speculate option (CLI flag, SDK option, gateway request). */
export function parseSpeculate(value: string): SpeculateMode {
  if (value === 'off' || value === 'ngram' || value === 'self') return value
  if (value.startsWith('draft:') && value.length > 'draft:'.length) return value as SpeculateMode
  throw new InvalidSpeculationError(`speculate must be one of off, ngram, self, draft:<model file>; got "${value}"`)
}

/** What a drafter may use of the client: its edge parts and model, and where the draft model sits. */
export interface SpeculationContext {
  readonly edge: Edge
  readonly first?: Shard
  readonly last?: Shard
  readonly model: ModelFile
  readonly kernels?: Kernels
  /** Draft models loaded so far, by path (loaded once per client). */
  readonly draftModels: Map<string, DraftModel>
  /** Longest draft and prior acceptance. */
  readonly draftLength?: DraftLengthOptions
  /** Counts of every speculative generation of this call (summed over reruns). */
  readonly stats?: SpeculationStats
}

function drafterFor(mode: SpeculateMode, init: GenerateInit, ctx: SpeculationContext): Drafter {
  const maxLength = init.promptTokens.length + init.maxTokens
  if (mode === 'ngram') return createNgramDrafter()
  if (mode === 'self') return createSelfDrafter(ctx.edge, ctx.first, ctx.last, maxLength, init)
  const path = mode.slice('draft:'.length)
  let model = ctx.draftModels.get(path)
  if (!model) {
    model = new DraftModel(path, ctx.model, ctx.kernels)
    ctx.draftModels.set(path, model)
  }
  return model.drafter(maxLength, init)
}

/** generateTokens, or its speculative form with the drafter `mode` names. */
export async function* decodeTokens(mode: SpeculateMode, init: GenerateInit, ctx: SpeculationContext): AsyncGenerator<number> {
  if (parseSpeculate(mode) === 'off') {
    yield* generateTokens(init)
    return
  }
  const drafter = drafterFor(mode, init, ctx)
  try {
    yield* speculativeTokens({ ...init, drafter, draftLength: ctx.draftLength, stats: ctx.stats })
  } finally {
    await drafter.close()
  }
}
