// The layerswarm SDK: swarm view, routing, multi-hop sessions with failover, generate()/stream().
import '../protocol/polyfills.js'

export { AuditBatcher, DEFAULT_AUDIT_EVERY, MAX_AUDIT_EVERY } from './audit-batch.js'
export { type CanaryEvidence, CanaryMonitor, type CanaryOptions, type CanaryPeerReport } from './canary-monitor.js'
export {
  type ClientInit,
  createClient,
  type GenerateOptions,
  type GenerateResult,
  LayerswarmClient,
  type VerificationReport
} from './client.js'
export { HopSession, type HopTarget } from './hop.js'
export { BadReceiptError, ReceiptLedger, type ReceiptSummary } from './receipts.js'
export { type Forwarding, RemotePipeline } from './remote-pipeline.js'
export { DEFAULT_REPLAY_WINDOW, type ReplayEvidence, ReplayIndex, type SignedStep, verifyReplayEvidence } from './replay-index.js'
export {
  MAX_ROLLBACKS,
  type RollbackEvent,
  type RollbackRecord,
  type StreamEvent,
  type TokenEvent,
  TooManyRollbacksError,
  VerifiedStreamNeedsCanariesError
} from './rollback.js'
export { NoRouteError, planRoute, type RouteCandidate, type RouteHop } from './route.js'
export { type PeerRecord, SwarmView } from './swarm-view.js'
export { detectorFingerprint, InvalidTrustFileError, loadTrust, saveTrust } from './trust-file.js'
export {
  ALL_WIRE_DTYPES,
  AUTO_WIRE_ORDER,
  InvalidWireError,
  negotiateWire,
  parseWireList,
  parseWirePreference,
  pickWire,
  UnsupportedWireError,
  WIRE_CHOICES,
  type WireChoice,
  type WirePreference,
  wireName
} from './wire.js'
export { type WireHopReport, WireLedger, type WireReport } from './wire-ledger.js'
