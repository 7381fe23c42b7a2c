import {
  benignClassKey,
  createDetector,
  defaultBenignModel,
  densityRatio,
  driftMetrics,
  quantizedWeights
} from '../../canary/index.js'
import { GgmlShard } from '../../shards/ggml/ggml-shard.js'
import type { GgmlBackend } from '../../shards/ggml/package.js'
import { createEdge, createShard, type ModelFile, selectKernelsFor } from '../../shards/index.js'

/**
 * Issue 32: an honest ggml span's decode answers scored as the client scores them: against the
 * client's references (selectKernelsFor: reference kernels below dim 256, native above) in the
 * class of the announced wire, KV dtype and backend, over `steps` checks (48-position sessions,
 * span [1, n-1)). Shared by the ggml-cpu and ggml-vulkan benign tests.
 */
export function measureBenign(model: ModelFile, steps: number, backend: GgmlBackend = 'ggml-cpu') {
  const c = model.config
  const kernels = selectKernelsFor(c, { kind: 'auto', threads: 1 })
  const edge = createEdge({ model, kernels })
  const [start, end] = [1, c.nLayers - 1]
  const reference = createShard({ model, start, end, kernels })
  const ggml = new GgmlShard({ model, start, end, backend, threads: 1, kvDType: 'f16' })
  const benign = defaultBenignModel()
  // the class the client gives a peer announcing backend ggml-cpu (canary/calibrate.ts)
  const cls = benignClassKey('f32', 'f16', quantizedWeights(model), backend)
  const det = createDetector({ benign })
  const relL2: number[] = []
  const ratios: number[] = []
  let seed = 7
  const next = () => {
    seed = (seed * 1103515245 + 12345) >>> 0
    return 3 + (seed % (c.vocabSize - 3))
  }
  const perSession = 48
  // ggml-vulkan compiles a matrix-vector pipeline per row count up to 8 and a matmul one above:
  // on lavapipe minutes each. A GPU span's prompt takes the 9-row shape its warm-up compiled.
  const promptRows = backend === 'ggml-cpu' ? 8 : 9
  if (backend !== 'ggml-cpu') ggml.warmUp()
  for (let s = 0; relL2.length < steps; s++) {
    const id = `s${s}`
    reference.openSession(id, { maxLength: perSession + 8 })
    ggml.openSession(id, { maxLength: perSession + 8 })
    const prompt = Array.from({ length: promptRows }, next)
    reference.forward(id, edge.embed(prompt), 0)
    ggml.forward(id, edge.embed(prompt), 0)
    for (let p = promptRows; p < perSession && relL2.length < steps; p++) {
      const x = edge.embed([next()])
      const drift = driftMetrics(ggml.forward(id, x, p), reference.forward(id, x, p))
      relL2.push(drift.relL2)
      ratios.push(densityRatio(benign, drift, cls, p + 1))
      det.observe(backend, drift, cls, p + 1)
    }
    reference.closeSession(id)
    ggml.closeSession(id)
  }
  kernels.close?.()
  ggml.close()
  const sorted = [...relL2].sort((a, b) => a - b)
  return {
    cls,
    checks: relL2.length,
    relL2Median: sorted[Math.floor(sorted.length / 2)],
    relL2Max: sorted[sorted.length - 1],
    maxDensityRatio: Math.max(...ratios),
    aboveOne: ratios.filter((r) => r > 1).length,
    cap: 1 / benign.contamination,
    verdict: det.report()[0]
  }
}
