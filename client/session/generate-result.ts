import type { GenerateResult, VerificationReport } from '../client-types.js'
import type { SwarmView } from '../routing/swarm-view.js'
import type { CanaryMonitor } from '../verification/canary-monitor.js'
import { EMPTY_RECEIPTS, mergeReceipts } from '../verification/receipts.js'
import type { HopTarget } from './hop.js'
import type { Forwarding, RemotePipeline } from './remote-pipeline.js'
import type { WireLedger } from './wire-ledger.js'

/** What one generation leaves behind, from which LayerswarmClient.stream builds its result. */
export interface GenerationOutcome {
  readonly promptTokens: number[]
  readonly tokens: number[]
  readonly text: string
  readonly rollbacks: VerificationReport['rollbacks']
  /** Every remote pipeline the generation opened (one per attempt: reruns after a rollback open more). */
  readonly remotes: readonly RemotePipeline[]
  readonly canaries?: CanaryMonitor
  /** Peers convicted by a rollback; the pipelines' own convictions are added to it. */
  readonly convicted: Set<string>
  readonly view: SwarmView
  readonly edge: VerificationReport['edge']
  readonly forwarding: Forwarding
  readonly wireLedger: WireLedger
  readonly speculation: GenerateResult['speculation']
}

/** The result and verification report of one generation: routes, failovers, receipts, canaries, rollbacks, wire bytes. */
export function generateResult(o: GenerationOutcome): GenerateResult {
  const { remotes, canaries, convicted } = o
  for (const remote of remotes) for (const p of remote.convicted) convicted.add(p)
  const routes = remotes.flatMap((remote) =>
    remote.routes.map((route: HopTarget[]) => route.map(({ peerId, start, end }) => ({ peerId, start, end })))
  )
  const receipts = remotes.reduce(
    (acc, remote) => mergeReceipts(acc, remote.receipts.summary()),
    canaries?.receipts.summary() ?? EMPTY_RECEIPTS
  )
  return {
    promptTokens: o.promptTokens,
    tokens: o.tokens,
    text: o.text,
    report: {
      routes,
      failovers: remotes.reduce((n, remote) => n + remote.failovers, 0),
      excludedPeers: o.view.bannedPeers(),
      edge: o.edge,
      forwarding: o.forwarding,
      receipts,
      canaries: canaries?.report() ?? [],
      evidence: [...(canaries?.evidence ?? [])],
      replays: [...(canaries?.replays.evidence ?? [])],
      reruns: o.rollbacks.length,
      rollbacks: o.rollbacks,
      wire: o.wireLedger.report()
    },
    convicted: [...convicted],
    speculation: o.speculation
  }
}
