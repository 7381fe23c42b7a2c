// Recovery: sealed KV snapshots, standbys and replacing a failed hop.

export { KvRecovery, type KvRecoveryInit } from './kv-recovery.js'
export { SnapshotKeeper, type SnapshotKeeperInit, type SpanSnapshots } from './snapshots.js'
export { StandbyKeeper, type StandbyKeeperInit, type StandbyRoute } from './standby.js'
