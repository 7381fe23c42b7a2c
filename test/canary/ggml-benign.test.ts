import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { openModelFile, parseShape, writeRandomModel } from '../../shards/index.js'
import { ggmlCpuSkipReason } from '../helpers/ggml.js'
import { measureBenign } from '../helpers/ggml-benign.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 32: ggml-cpu is a benign class the detector was never calibrated on. Its honest answers
// (f16 KV on the device, ggml's own reduction order and activation quantisation) are scored as
// the client scores them: against the client's references (selectKernelsFor: reference kernels
// below dim 256, native above) in the class of the announced wire, KV dtype and backend (a
// ggml backend is scored in /qw: in the f32 class the same answers hit the density cap). Zero convictions
// over GGML_BENIGN_STEPS decode checks per model (default 600; docs/verification.md reports a
// 10,000-check run), and no density ratio at the cap.

const why = ggmlCpuSkipReason()
const STEPS = Number(process.env.GGML_BENIGN_STEPS ?? 600)
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-ggml-benign-'))

describe.skipIf(why !== '')('ggml-cpu is benign to the detector', () => {
  it('stories260K f32 and a random 256-dim Q8_0 model: honest ggml-cpu answers are never convicted', { timeout: 600_000 }, () => {
    const q8 = join(dir, 'q8.gguf')
    writeRandomModel(q8, parseShape('256,4,4,4,512,512'), { dtype: 'q8_0', seed: 11, seqLen: 128 })
    for (const path of [GGUF_PATH, q8]) {
      const model = openModelFile(path)
      const m = measureBenign(model, STEPS)
      console.log(
        JSON.stringify({
          model: path.split('/').at(-1),
          ...m,
          verdict: { posterior: m.verdict.posterior, excluded: m.verdict.excluded }
        })
      )
      expect(m.checks).toBe(STEPS)
      expect(m.verdict.excluded).toBe(false)
      // as test/canary/kv-dtype-calibration.test.ts: no single honest answer at the cap
      expect(m.maxDensityRatio).toBeLessThan(m.cap)
      model.close()
    }
  })
})
