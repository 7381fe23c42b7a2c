// The layerswarm SDK: swarm view, routing, multi-hop sessions with failover, generate()/stream().
import '../protocol/polyfills.js'

export { createClient, LayerswarmClient, type ClientInit, type GenerateOptions, type GenerateResult, type VerificationReport } from './client.js'
export { planRoute, NoRouteError, type RouteCandidate, type RouteHop } from './route.js'
export { SwarmView, type PeerRecord } from './swarm-view.js'
export { RemotePipeline, type Forwarding } from './remote-pipeline.js'
export { HopSession, type HopTarget } from './hop.js'
export {
  type WireChoice,
  ALL_WIRE_DTYPES,
  AUTO_WIRE_ORDER,
  InvalidWireError,
  negotiateWire,
  parseWireList,
  parseWirePreference,
  pickWire,
  UnsupportedWireError,
  WIRE_CHOICES,
  type WirePreference,
  wireName
} from './wire.js'
export { WireLedger, type WireHopReport, type WireReport } from './wire-ledger.js'
export { BadReceiptError, ReceiptLedger, type ReceiptSummary } from './receipts.js'
export { DEFAULT_REPLAY_WINDOW, ReplayIndex, type ReplayEvidence, type SignedStep, verifyReplayEvidence } from './replay-index.js'
export { AuditBatcher, DEFAULT_AUDIT_EVERY, MAX_AUDIT_EVERY } from './audit-batch.js'
export { detectorFingerprint, InvalidTrustFileError, loadTrust, saveTrust } from './trust-file.js'
export { CanaryMonitor, type CanaryEvidence, type CanaryOptions, type CanaryPeerReport } from './canary-monitor.js'
