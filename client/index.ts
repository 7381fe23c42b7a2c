// The layerswarm SDK: swarm view, routing, multi-hop sessions with failover, generate()/stream().
import '../protocol/polyfills.js'

export { AuditBatcher, DEFAULT_AUDIT_EVERY, MAX_AUDIT_EVERY } from './audit-batch.js'
export { bootstrapDialError, checkBootstrapAddress, parseBootstrapList, suggestMultiaddr } from './bootstrap-check.js'
export {
  type CanaryBankInit,
  defaultBankKeyFile,
  edgeOnlyModel,
  openCanaryBank
} from './canary-bank-init.js'
export { type CanaryEvidence, CanaryMonitor, type CanaryOptions, type CanaryPeerReport } from './canary-monitor.js'
export {
  CANARY_SECRET_BYTES,
  loadOrCreateSecret,
  randomSecret,
  type SecretPromptOptions,
  secretPrompts,
  secretSeed
} from './canary-secret.js'
export {
  type ClientInit,
  createClient,
  type GenerateOptions,
  type GenerateResult,
  LayerswarmClient,
  type VerificationReport
} from './client.js'
export { createSelfDrafter, DraftModel, ModelDrafter } from './draft-model.js'
export { createNgramDrafter, type Draft, type Drafter, type NgramDrafterOptions, ngramDraft } from './draft-ngram.js'
export * from './errors.js'
export { type HopOpenInit, HopSession, type HopStepOutcome, type HopTarget, type KvExportRange, type KvImport } from './hop.js'
export { KvRecovery, type KvRecoveryInit } from './kv-recovery.js'
export * from './options.js'
export {
  CanaryObserver,
  type CompletedStep,
  type Exclusion,
  type PipelineObserver,
  type PipelineState
} from './pipeline-observer.js'
export { ReceiptLedger, type ReceiptSummary } from './receipts.js'
export { RemotePipeline, type RemotePipelineInit } from './remote-pipeline.js'
export { DEFAULT_REPLAY_WINDOW, type ReplayEvidence, ReplayIndex, type SignedStep, verifyReplayEvidence } from './replay-index.js'
export { MAX_ROLLBACKS, type RollbackEvent, type RollbackRecord, type StreamEvent, type TokenEvent } from './rollback.js'
export { planRoute, type RouteCandidate, type RouteHop } from './route.js'
export { SnapshotKeeper, type SnapshotKeeperInit, type SpanSnapshots } from './snapshots.js'
export { decodeTokens, parseSpeculate, SPECULATE_MODES, type SpeculateMode, type SpeculationContext } from './speculation.js'
export { acceptOrResample, sampleFrom, targetProbs } from './speculative-accept.js'
export {
  emptySpeculationStats,
  type SpeculationStats,
  type SpeculativeInit,
  type SpeculativeStepOptions,
  speculativeTokens
} from './speculative-decode.js'
export { DraftLength, type DraftLengthOptions } from './speculative-k.js'
export { StandbyKeeper, type StandbyKeeperInit, type StandbyRoute } from './standby.js'
export { type Forwarding, type StepHopTiming, StepTransport, type StepTransportInit } from './step-transport.js'
export { type PeerRecord, type RefreshReport, type RouteWaitProgress, SwarmView } from './swarm-view.js'
export { detectorFingerprint, loadTrust, saveTrust } from './trust-file.js'
export { type WireHopReport, WireLedger, type WireReport } from './wire-ledger.js'
export {
  ALL_WIRE_DTYPES,
  AUTO_WIRE_ORDER,
  DEPRECATED_WIRE_NAMES,
  negotiateWire,
  parseWireList,
  parseWirePreference,
  pickWire,
  WIRE_CHOICES,
  WIRE_CLI_CHOICES,
  type WireChoice,
  type WirePreference,
  wireDtypeFromName
} from './wire-negotiation.js'
