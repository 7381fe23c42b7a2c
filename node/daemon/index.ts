// The node daemon: what the CLI and the gateway use of it (they import nothing else from here).
export { hostAllowed } from './host-check.js'
export { Metrics, type MetricsServer, serveMetrics } from './metrics.js'
export { type ModelRank, type ModelSupply, rankModel, rankModelsByDemand } from './placement/model-demand.js'
export { DEFAULT_BALANCE_QUALITY, shouldMove } from './placement/rebalance.js'
export { chooseSpan, type ServedSpan } from './placement/span-selection.js'
export { SwarmNode } from './server.js'
export type { SwarmNodeInit } from './swarm-node-init.js'
