// Issue 33: weights from the swarm: discovery, checked chunked fetches, liars.

export { ByteRate } from './bandwidth.js'
export type { FetchedWeights } from './client-fetch.js'
export { defaultModelsDir, edgeWant, type FetchedModel, type FetchModelInit, fetchModel } from './fetch-model.js'
export { type FetchOptions, type FetchReport, fetchPieces, openWeightsStore } from './fetcher.js'
export { type HeadChunks, pickHeadChunks } from './head-chunks.js'
export { type LiarRecord, readLiars } from './liars.js'
export { discoverWeightPeers } from './peers.js'
export { type Seeder, type SeederOptions, serveWeights } from './seeder.js'
export { wholePiecesSource } from './whole-pieces.js'
