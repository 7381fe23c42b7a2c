// Integrity: canary sets and reference activations, drift metrics, the detector, mixing.

export {
  type AdaptiveRate,
  type AdaptiveRateOptions,
  createAdaptiveRate,
  expectedStepsToExclusion,
  fixedRate,
  type RateEvidence,
  startCanariesFor
} from './adaptive-rate.js'
export { type BackgroundJobOptions, DEFAULT_BACKGROUND_SHARE, runInBackground } from './background-job.js'
export {
  BENIGN_PROFILES,
  type BenignProfile,
  benignClassKey,
  type CalibrateOptions,
  type Calibration,
  type CalibrationTarget,
  calibrate,
  collectBenignSamples,
  endsAfter,
  type PeerSession,
  profileKernels,
  quantizedWeights,
  runPeerSession,
  sessionDrifts,
  sessionSteps
} from './calibrate.js'
export {
  CANARY_BANK_KEY_BYTES,
  canaryBankModelId,
  loadBankKey,
  loadCanaryBank,
  loadOrCreateBankKey,
  saveCanaryBank
} from './canary-bank.js'
export {
  CANARY_FILE_VERSION,
  type LoadCanarySetExpect,
  loadCanarySet,
  loadOrBuildCanarySet,
  saveCanarySet
} from './canary-file.js'
export {
  type BuildCanarySetOptions,
  type BuildCanaryTracesOptions,
  buildCanarySet,
  buildCanaryTraces,
  buildCanaryTracesInSlices,
  buildCanaryTracesJob,
  type Canary,
  type CanarySet,
  type CanaryTraces,
  canarySetFromTraces,
  DEFAULT_CANARY_LENGTH,
  type ExtendCanaryTracesOptions,
  extendCanaryTraces,
  extendCanaryTracesInSlices,
  extendCanaryTracesJob,
  inputFor,
  MAX_CANARY_PROMPT_TOKENS,
  referenceFor
} from './canary-set.js'
export { calibrateDefault, calibrationQuantizedModels, calibrationRandomModels, defaultBenignModel } from './default-model.js'
export {
  createDetector,
  DEFAULT_RATES,
  type Detector,
  type DetectorOptions,
  type DetectorRecord,
  type PeerVerdict
} from './detector.js'
export { type Drift, driftMetrics, validateDrift } from './drift.js'
export { type FitOptions, fitDriftModel } from './drift-fit.js'
export {
  DEFAULT_FEATURES,
  type DriftClass,
  type DriftFeature,
  type DriftModel,
  type DriftSample,
  densityRatio,
  driftFeatures,
  logDriftScore,
  parseDriftModel,
  positionBucket,
  serializeDriftModel
} from './drift-model.js'
export * from './errors.js'
export { createHeadTamper, HEAD_TAMPER_MODES, type HeadTamperInit, type HeadTamperMode } from './head-tamper.js'
export * from './mixing.js'
export { DEFAULT_CANARY_RATE } from './options.js'
export { measureCanaryOverhead } from './overhead.js'
export { DEFAULT_CANARY_PROMPTS, HELD_OUT_PROMPTS } from './prompts.js'
export { createRandom, hashSeed, type Random } from './rng.js'
export { createSpanRunner, type SpanRunner, type SpanRunnerInit } from './span-runner.js'
export { auroc, quantile } from './stats.js'
export {
  createTamper,
  roundMantissa,
  TAMPER_MODES,
  type Tamper,
  type TamperContext,
  type TamperMode,
  type TamperOptions
} from './tamper.js'
export { tamperingShard } from './tampering-shard.js'
export { type CanaryTrace, loadBlockShards, runNow } from './trace.js'
export { WIRE_DTYPES, type WireDType, wireRoundtrip } from './wire-roundtrip.js'
