import { loadGgml, pickDevice } from '../../shards/ggml/runtime.js'

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

/**
 * Why ggml-vulkan cannot run here ('' when it can): no package (`layerswarm backend install
 * vulkan`) or no Vulkan device, which on a machine without a GPU means Mesa's lavapipe
 * (mesa-vulkan-drivers >= 25, Debian 12: bookworm-backports) exposed with
 * GGML_VK_VISIBLE_DEVICES=0, set here for this process and the nodes it starts.
 * Opt-in: lavapipe's first pipeline compile on a fresh machine takes tens of minutes on 2 cores
 * (measured: the swarm file did not finish in 19 min with an empty Mesa cache), more than CI's
 * budget allows. `LAYERSWARM_TEST_VULKAN=1 bash .ci/run` installs both and runs these suites; with
 * that flag a missing device fails instead of skipping (docs/backends.md).
 */
export function ggmlVulkanSkipReason(): string {
  if (process.env.LAYERSWARM_TEST_VULKAN !== '1') return 'opt-in: set LAYERSWARM_TEST_VULKAN=1 (docs/backends.md)'
  process.env.GGML_VK_VISIBLE_DEVICES ??= '0'
  try {
    pickDevice(loadGgml('vulkan'), 'ggml-vulkan', 0)
    return ''
  } catch (e) {
    const why = `ggml-vulkan unavailable: ${(e as Error).message}`
    throw new Error(
      `${why} (LAYERSWARM_TEST_VULKAN=1 needs it: .ci/run then installs mesa-vulkan-drivers and runs \`layerswarm backend install vulkan\`)`
    )
  }
}
