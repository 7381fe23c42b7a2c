// The head on a peer, client side (issue #35): requests, sealed replies, checks and sampling.
export {
  DEFAULT_CHECK_DTYPE,
  DEFAULT_SECRET_ROWS,
  HEAD_CONVICT_VIOLATIONS,
  HEAD_TOLERANCE_SIGMAS,
  type HeadStats,
  headMemory,
  headStatsOf,
  headTolerance,
  lowDimensionalHead,
  RemoteHead
} from './remote-head.js'
export { remoteHeadTokens } from './remote-head-generate.js'
export { perTokenRemote } from './remote-head-per-token.js'
export { type HeadAsk, headAsk, logprobAsk, pickFromRow, pickMasked, rowLogits, rowLogprobs } from './remote-head-sampler.js'
