// The layerswarm SDK: swarm view, routing, multi-hop sessions with failover, generate()/stream().
import '../protocol/polyfills.js'

export {
  type ClientInit,
  createClient,
  type GenerateOptions,
  type GenerateResult,
  LayerswarmClient,
  type VerificationReport
} from './client.js'
export * from './errors.js'
export * from './options.js'
export * from './recovery/index.js'
export * from './routing/index.js'
export * from './session/index.js'
export * from './speculation/index.js'
export * from './verification/index.js'
export * from './weights/index.js'
