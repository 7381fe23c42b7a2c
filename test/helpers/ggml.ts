import { loadGgml } from '../../shards/ggml/runtime.js'

/**
 * Why the ggml-cpu backend cannot run here ('' when it can): the span addon is not built or
 * `layerswarm backend install cpu` was not run (issue 32). Under CI=1 the suites that use it
 * fail instead of skipping: .ci/run installs the package, so a missing one is a broken setup.
 */
export function ggmlCpuSkipReason(): string {
  try {
    loadGgml('cpu')
    return ''
  } catch (e) {
    const why = `ggml-cpu unavailable: ${(e as Error).message}`
    if (process.env.CI) throw new Error(`${why} (CI=1 needs it: .ci/run runs \`layerswarm backend install cpu\`)`)
    console.warn(`skipping: ${why}`)
    return why
  }
}
