import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { describe, expect, it } from 'vitest'
import { loadGgml, pickDevice } from '../../shards/ggml/runtime.js'
import { parseShape, writeRandomModel } from '../../shards/index.js'
import { CLI } from '../helpers/cli.js'
import { ggmlVulkanSkipReason } from '../helpers/ggml.js'
import { ROOT } from '../helpers/reference.js'

// Issue 32: `join --backend ggml-vulkan` without --num-blocks sizes its span by the device's free
// memory (ggml_backend_dev_memory through blocksForDevice), not by half the model: a model whose
// context makes one block's KV cache about 2/5 of the usable device memory gets a 2-block span,
// and the node it starts serves exactly that many blocks on the Vulkan device. `backend list`
// (the lines `doctor` prints) names the installed backends and the device.

const why = ggmlVulkanSkipReason()

describe.skipIf(why !== '')('join on a ggml-vulkan device', () => {
  it('backend list (as doctor) names the installed backends and the Vulkan device', () => {
    const r = spawnSync(process.execPath, [CLI, 'backend', 'list'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 })
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^ggml backends installed: .*vulkan/m)
    expect(r.stdout).toMatch(/^ggml Vulkan device 0: .+ \((gpu|igpu)[,)].* MiB free\) from @node-llama-cpp\/[\w-]*vulkan/m)
  })

  it('serves as many blocks as the device memory holds', { timeout: 900_000 }, async () => {
    const free = pickDevice(loadGgml('vulkan'), 'ggml-vulkan', 0).freeBytes
    // dim 64, 2 of 4 heads for KV: a row of K or V is 32 f16 values; the weights are a few KiB
    const kvRowBytes = 32 * 2
    const seqLen = Math.floor((free * 0.8) / 2.5 / (2 * kvRowBytes))
    const model = join(mkdtempSync(join(tmpdir(), 'layerswarm-vulkan-join-')), 'long-context.gguf')
    writeRandomModel(model, parseShape('64,5,4,2,96,300'), { dtype: 'q8_0', seed: 31, seqLen })
    const joiner = spawn(
      process.execPath,
      [CLI, 'join', '--model', model, '--backend', 'ggml-vulkan', '--kv-dtype', 'f16', '--ephemeral-identity'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }
    )
    const stderr: string[] = []
    createInterface({ input: joiner.stderr! }).on('line', (l) => stderr.push(l))
    const events: Array<Record<string, unknown>> = []
    const serving = new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: joiner.stdout! }).on('line', (l) => {
        const e = JSON.parse(l) as Record<string, unknown>
        events.push(e)
        if (e.event === 'serving') resolve(e)
      })
      joiner.once('exit', (code) => reject(new Error(`join exited (${code}): ${stderr.join('\n')}`)))
    })
    try {
      const served = await serving
      const device = events.find((e) => e.event === 'device')
      expect(device?.backend).toBe('ggml-vulkan')
      // the join process's own reading of free memory may differ a little from this one's
      expect(device?.blocks).toBeGreaterThanOrEqual(1)
      expect(device?.blocks).toBeLessThanOrEqual(3)
      const [start, end] = served.layers as [number, number]
      expect(end - start).toBe(device?.blocks)
    } finally {
      joiner.kill('SIGTERM')
      if (joiner.exitCode === null) await once(joiner, 'exit')
    }
  })
})
