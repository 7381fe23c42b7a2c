// Sessions and generation: hop sessions, the step transport, the remote pipeline and what it yields.

export {
  type HopOpenInit,
  HopSession,
  type HopStepOutcome,
  type HopTarget,
  type KvExportRange,
  type KvImport
} from './hop.js'
export {
  CanaryObserver,
  type CompletedStep,
  type Exclusion,
  type PipelineObserver,
  type PipelineState
} from './pipeline-observer.js'
export { RemotePipeline, type RemotePipelineInit } from './remote-pipeline.js'
export { MAX_ROLLBACKS, type RollbackEvent, type RollbackRecord, type StreamEvent, type TokenEvent } from './rollback.js'
export { type Forwarding, type StepHopTiming, StepTransport, type StepTransportInit } from './step-transport.js'
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
