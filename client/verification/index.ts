// The client's verification: canaries, decoys, audits, redundancy, receipts, evidence and trust.

export { AuditBatcher, DEFAULT_AUDIT_EVERY, MAX_AUDIT_EVERY } from './audit-batch.js'
export {
  type CanaryBankInit,
  defaultBankKeyFile,
  edgeOnlyModel,
  openCanaryBank
} from './canaries/canary-bank-init.js'
export {
  CANARY_SECRET_BYTES,
  loadOrCreateSecret,
  randomSecret,
  type SecretPromptOptions,
  secretPrompts,
  secretSeed
} from './canaries/canary-secret.js'
export { type CanaryEvidence, CanaryMonitor, type CanaryOptions, type CanaryPeerReport } from './canary-monitor.js'
export { CanaryObserver } from './canary-observer.js'
export { type CanaryEvidenceCheck, type EvidenceReport, verifyEvidence } from './evidence.js'
export { ReceiptLedger, type ReceiptSummary } from './receipts.js'
export {
  DEFAULT_REPLAY_WINDOW,
  type ReplayEvidence,
  ReplayIndex,
  type SignedStep,
  verifyReplayEvidence
} from './replay-index.js'
export { detectorFingerprint, loadTrust, saveTrust } from './trust-file.js'
