/*
 * Issue 33 item 3: which model a joining node serves when the swarm serves several. Each model's
 * peers announce their span, throughput (tokens/s) and demand (tokens of client steps asked of
 * their span over the last minute; node/daemon/placement/demand-meter.ts). Per block, supply is the sum
 * of the throughput of the peers serving it and demand the sum of theirs; a model's supply is its
 * bottleneck block's, its demand its busiest block's. The rule (docs/weights.md):
 *
 * 1. A model with a block nobody serves comes first: no client can use it until it is whole
 *    (its demand is what clients running those blocks themselves ask). Among those, more demand
 *    first, then the smaller share of its blocks served.
 * 2. Then the model whose demand most outruns its supply: (demand + 1 token/min) / 60 / bottleneck
 *    (the share of its bottleneck's capacity clients use); ties: the smaller bottleneck.
 * 3. Ties: the content id, so every joiner that sees the same swarm makes the same choice.
 *
 * The span inside the model is then Petals' rule as before (span-selection.ts).
 */

export interface ModelSupply {
  readonly contentId: string
  readonly modelId: string
  readonly nBlocks: number
  readonly peers: ReadonlyArray<{
    readonly start: number
    readonly end: number
    readonly throughput: number
    readonly demandTokensPerMinute: number
  }>
}

export interface ModelRank {
  readonly contentId: string
  readonly modelId: string
  readonly nBlocks: number
  /** Blocks some peer serves. */
  readonly servedBlocks: number
  /** Tokens/s of the least served block (0 with a block nobody serves). */
  readonly bottleneck: number
  /** Tokens asked of the busiest block over the last minute. */
  readonly demandTokensPerMinute: number
  /** Share of the bottleneck's capacity clients ask for (Infinity with a block nobody serves). */
  readonly pressure: number
}

export function rankModel(m: ModelSupply): ModelRank {
  let bottleneck = Number.POSITIVE_INFINITY
  let demand = 0
  let servedBlocks = 0
  for (let b = 0; b < m.nBlocks; b++) {
    let supply = 0
    let asked = 0
    for (const p of m.peers) {
      if (b < p.start || b >= p.end) continue
      supply += Math.max(0, p.throughput)
      asked += Math.max(0, p.demandTokensPerMinute)
    }
    if (supply > 0 || m.peers.some((p) => b >= p.start && b < p.end)) servedBlocks++
    bottleneck = Math.min(bottleneck, supply)
    demand = Math.max(demand, asked)
  }
  if (m.nBlocks === 0) bottleneck = 0
  const whole = servedBlocks === m.nBlocks && bottleneck > 0
  return {
    contentId: m.contentId,
    modelId: m.modelId,
    nBlocks: m.nBlocks,
    servedBlocks,
    bottleneck,
    demandTokensPerMinute: demand,
    pressure: whole ? (demand + 1) / 60 / bottleneck : Number.POSITIVE_INFINITY
  }
}

/** The models best first by the rule above. */
export function rankModelsByDemand(models: readonly ModelSupply[]): ModelRank[] {
  return models.map(rankModel).sort((a, b) => {
    const gapA = a.pressure === Number.POSITIVE_INFINITY
    const gapB = b.pressure === Number.POSITIVE_INFINITY
    if (gapA !== gapB) return gapA ? -1 : 1
    if (gapA) {
      if (a.demandTokensPerMinute !== b.demandTokensPerMinute) return b.demandTokensPerMinute - a.demandTokensPerMinute
      const shareA = a.servedBlocks / Math.max(1, a.nBlocks)
      const shareB = b.servedBlocks / Math.max(1, b.nBlocks)
      if (shareA !== shareB) return shareA - shareB
    } else {
      if (a.pressure !== b.pressure) return b.pressure - a.pressure
      if (a.bottleneck !== b.bottleneck) return a.bottleneck - b.bottleneck
    }
    return a.contentId < b.contentId ? -1 : a.contentId > b.contentId ? 1 : 0
  })
}
