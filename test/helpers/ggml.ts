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
 * GGML_VK_VISIBLE_DEVICES=0, set here for this process and the nodes it starts. Under CI=1 it
 * fails instead: .ci/run installs both.
 */
export function ggmlVulkanSkipReason(): string {
  process.env.GGML_VK_VISIBLE_DEVICES ??= '0'
  try {
    pickDevice(loadGgml('vulkan'), 'ggml-vulkan', 0)
    return ''
  } catch (e) {
    const why = `ggml-vulkan unavailable: ${(e as Error).message}`
    if (process.env.CI)
      throw new Error(
        `${why} (CI=1 needs it: .ci/run installs mesa-vulkan-drivers and runs \`layerswarm backend install vulkan\`)`
      )
    console.warn(`skipping: ${why}`)
    return why
  }
}
