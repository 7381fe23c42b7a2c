import { createRandomModel, type ModelFile, parseShape } from '../shards/index.js'
import { type Calibration, type CalibrationTarget, calibrate } from './calibrate.js'
import { DEFAULT_CALIBRATION_JSON } from './default-calibration.js'
import { type DriftFeature, type DriftModel, parseDriftModel } from './drift-model.js'

let cached: DriftModel | undefined

/**
 * The shipped benign drift model, calibrated on the bundled stories260K model (boundaries 1, 2,
 * 3, every span end) and two random-weight shapes, over the four benign profiles and the three
 * wire dtypes (see DEFAULT_CALIBRATION_RECIPE; regenerate with `npm run bench -- canary --calibrate`).
 */
export function defaultBenignModel(): DriftModel {
  cached ??= parseDriftModel(DEFAULT_CALIBRATION_JSON)
  return cached
}

/** Random-weight models of the default calibration (and of the canary benchmark). */
export function calibrationRandomModels(): { name: string; model: ModelFile }[] {
  return [
    {
      name: 'random-64,3,4,4,96,300',
      model: createRandomModel(parseShape('64,3,4,4,96,300'), { dtype: 'f32', seed: 3, seqLen: 128 })
    },
    { name: 'random-tiny', model: createRandomModel(parseShape('tiny'), { dtype: 'f32', seed: 5, seqLen: 128 }) }
  ]
}

/**
 * Random-weight models with matrices the fast kernels multiply with quantised activations
 * (Q8_0, and the Q4_K_M mixture with Q6_K and Q5_0/Q8_0 fallbacks): their benign drift has
 * classes of its own (benignClassKey's `/qw`).
 */
export function calibrationQuantizedModels(): { name: string; model: ModelFile }[] {
  const shape = parseShape('256,3,4,2,512,300')
  return (['q8_0', 'q4_k_m'] as const).map((dtype) => ({
    name: `random-256,3,4,2,512,300-${dtype}`,
    model: createRandomModel(shape, { dtype, seed: 7, seqLen: 128 })
  }))
}

/** Recompute the default calibration from the bundled model file (stories260K.gguf). */
export function calibrateDefault(
  bundled: ModelFile,
  seed = 1,
  features?: readonly DriftFeature[],
  maxPoints?: number
): Calibration {
  const targets: CalibrationTarget[] = [
    { model: bundled, boundaries: [1, 2, 3] },
    ...calibrationRandomModels().map(({ model }) => ({ model, boundaries: [1] })),
    ...calibrationQuantizedModels().map(({ model }) => ({ model, boundaries: [1] }))
  ]
  return calibrate({ targets, seed, features, maxPoints })
}
