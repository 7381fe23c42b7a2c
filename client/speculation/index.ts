// Speculative decoding: drafters, draft length and acceptance.

export { createSelfDrafter, DraftModel, ModelDrafter } from './draft-model.js'
export { createNgramDrafter, type Draft, type Drafter, type NgramDrafterOptions, ngramDraft } from './draft-ngram.js'
export {
  decodeTokens,
  parseSpeculate,
  SPECULATE_MODES,
  type SpeculateMode,
  type SpeculationContext
} from './speculation.js'
export { acceptOrResample, sampleFrom, targetProbs } from './speculative-accept.js'
export {
  emptySpeculationStats,
  type SpeculationStats,
  type SpeculativeInit,
  type SpeculativeStepOptions,
  speculativeTokens
} from './speculative-decode.js'
export { DraftLength, type DraftLengthOptions } from './speculative-k.js'
