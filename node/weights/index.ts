// Issue 33: a node's weights: serving chunks to the swarm under upload caps.
export { ByteRate } from './bandwidth.js'
export { fileManifest } from './manifest-cache.js'
export { type Seeder, type SeederOptions, serveWeights } from './seeder.js'
