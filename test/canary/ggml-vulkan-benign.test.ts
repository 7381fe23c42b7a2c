import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { openModelFile, parseShape, writeRandomModel } from '../../shards/index.js'
import { ggmlVulkanSkipReason } from '../helpers/ggml.js'
import { measureBenign } from '../helpers/ggml-benign.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 32: ggml-vulkan (Mesa's lavapipe here: other shaders, other reduction orders, f16
// accumulation in its matmul tiles) is a benign class the detector was never calibrated on,
// scored like ggml-cpu in the /qw class of its announced backend. Zero convictions over
// GGML_BENIGN_STEPS decode checks per model (default 300; docs/verification.md reports a
// 10,000-check run), and no density ratio at the cap. The Q8_0 file has the shapes of
// test/e2e/ggml-vulkan-swarm.test.ts, so the two share lavapipe's compiled pipelines.

const why = ggmlVulkanSkipReason()
const STEPS = Number(process.env.GGML_BENIGN_STEPS ?? 300)
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-ggml-vulkan-benign-'))

describe.skipIf(why !== '')('ggml-vulkan is benign to the detector', () => {
  it('stories260K f32 and a Llama-shaped Q8_0 model: honest ggml-vulkan answers are never convicted', {
    timeout: 900_000
  }, () => {
    const q8 = join(dir, 'q8.gguf')
    writeRandomModel(q8, parseShape('64,5,4,2,96,300'), { dtype: 'q8_0', seed: 31, seqLen: 128 })
    for (const path of [GGUF_PATH, q8]) {
      const model = openModelFile(path)
      const m = measureBenign(model, STEPS, 'ggml-vulkan')
      console.log(
        JSON.stringify({
          model: path.split('/').at(-1),
          ...m,
          verdict: { posterior: m.verdict.posterior, excluded: m.verdict.excluded }
        })
      )
      expect(m.checks).toBe(STEPS)
      expect(m.verdict.excluded).toBe(false)
      expect(m.maxDensityRatio).toBeLessThan(m.cap)
      model.close()
    }
  })
})
