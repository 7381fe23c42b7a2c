// Routing: the swarm view, route planning, dial policy and peer load.

export { bootstrapDialError, checkBootstrapAddress, parseBootstrapList, suggestMultiaddr } from './bootstrap-check.js'
export { planRoute, type RouteCandidate, type RouteHop } from './route.js'
export { type PeerRecord, type RefreshReport, type RouteWaitProgress, SwarmView } from './swarm-view.js'
