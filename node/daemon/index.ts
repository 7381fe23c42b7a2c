// The node daemon: what the CLI and the gateway use of it (they import nothing else from here).
export { hostAllowed } from './host-check.js'
export { Metrics, type MetricsServer, serveMetrics } from './metrics.js'
export { type ModelRank, type ModelSupply, rankModel, rankModelsByDemand } from './model-demand.js'
export { DEFAULT_BALANCE_QUALITY, shouldMove } from './rebalance.js'
export { SwarmNode } from './server.js'
export { chooseSpan, type ServedSpan } from './span-selection.js'
export type { SwarmNodeInit } from './swarm-node-init.js'
