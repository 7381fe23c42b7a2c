// The head on a peer (issue #35): top-k replies and the client's low-dimensional head.

export { type CheckDType, HeadRows, type HeadRowsOptions, type LocalHeadRow } from './head-rows.js'
export { decodeHeadRows, encodeHeadRows, type HeadRow, headTopK, type TopKRequest } from './head-topk.js'
