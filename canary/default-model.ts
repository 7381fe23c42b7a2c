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

/** Recompute the default calibration from the bundled model file (stories260K.gguf). */
export function calibrateDefault(
  bundled: ModelFile,
  seed = 1,
  features?: readonly DriftFeature[],
  maxPoints?: number
): Calibration {
  const targets: CalibrationTarget[] = [
    { model: bundled, boundaries: [1, 2, 3] },
    ...calibrationRandomModels().map(({ model }) => ({ model, boundaries: [1] }))
  ]
  return calibrate({ targets, seed, features, maxPoints })
}
