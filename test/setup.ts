import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { backendsDir } from '../shards/ggml/package.js'

// Shared test setup. libp2p 3 on Node 20 needs Promise.withResolvers before it loads.
if (typeof (Promise as unknown as { withResolvers?: unknown }).withResolvers !== 'function') {
  ;(Promise as unknown as { withResolvers: () => unknown }).withResolvers = function withResolvers<T>() {
    let resolve!: (v: T | PromiseLike<T>) => void
    let reject!: (e?: unknown) => void
    const promise = new Promise<T>((res, rej) => {
      resolve = res
      reject = rej
    })
    return { promise, resolve, reject }
  }
}

// The ggml backends `layerswarm backend install` put in the real home (.ci/run installs cpu,
// issue 32) stay visible to the tests and the processes they spawn (LAYERSWARM_BACKENDS_DIR).
if (!process.env.LAYERSWARM_BACKENDS_DIR) process.env.LAYERSWARM_BACKENDS_DIR = backendsDir()
// No test reads or writes the real ~/.layerswarm: node and client key files default to a scratch
// home per test file (node/identity.ts), inherited by the CLI processes tests spawn.
if (!process.env.LAYERSWARM_HOME) {
  process.env.LAYERSWARM_HOME = mkdtempSync(join(tmpdir(), 'layerswarm-home-'))
}
