// Issue 33: a node's weights: the cached manifest of a whole file (the seeder is client/weights/seeder.ts: clients seed too).
export { fileManifest } from './manifest-cache.js'
