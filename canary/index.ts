// Integrity: canary sets and reference activations, drift metrics, the detector, mixing.
export * from './errors.js'
export { type Drift, driftMetrics, validateDrift } from './drift.js'
export { createRandom, hashSeed, type Random } from './rng.js'
export { type WireDType, WIRE_DTYPES, wireRoundtrip } from './wire.js'
export { DEFAULT_CANARY_PROMPTS, HELD_OUT_PROMPTS } from './prompts.js'
export { type BuildCanarySetOptions, buildCanarySet, type Canary, type CanarySet, inputFor, referenceFor } from './canary-set.js'
export { type LoadCanarySetExpect, loadCanarySet, saveCanarySet } from './canary-file.js'
export { createSpanRunner, type SpanRunner, type SpanRunnerInit } from './span-runner.js'
export {
  type DriftClass,
  type DriftModel,
  type DriftSample,
  densityRatio,
  driftFeatures,
  type FitOptions,
  fitDriftModel,
  parseDriftModel,
  serializeDriftModel
} from './drift-model.js'
export { createDetector, DEFAULT_RATES, type Detector, type DetectorOptions, type PeerVerdict } from './detector.js'
export {
  BENIGN_PROFILES,
  type BenignProfile,
  type Calibration,
  type CalibrateOptions,
  type CalibrationTarget,
  calibrate,
  collectBenignSamples,
  endsAfter,
  type PeerSession,
  profileKernels,
  runPeerSession,
  sessionDrifts,
  sessionSteps
} from './calibrate.js'
export { calibrateDefault, calibrationRandomModels, defaultBenignModel } from './default-model.js'
export { auroc, quantile } from './stats.js'
export * from './mixing.js'
export { type AdaptiveRate, type AdaptiveRateOptions, createAdaptiveRate, fixedRate, type RateEvidence } from './adaptive-rate.js'
export { measureCanaryOverhead } from './overhead.js'
