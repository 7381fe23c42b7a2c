import {
  type AdaptiveRate,
  type CanarySet,
  createAdaptiveRate,
  createDetector,
  DEFAULT_CANARY_RATE,
  type Detector,
  type DriftModel,
  defaultBenignModel,
  fixedRate,
  type PeerVerdict,
  quantizedWeights,
  type Random
} from '../../canary/index.js'
import type { Host } from '../../protocol/index.js'
import { errorCode, type ModelFile } from '../../shards/index.js'
import { DEFAULT_REDUNDANCY_RATE } from '../options.js'
import type { HopTarget } from '../session/hop.js'
import { AuditBatcher } from './audit-batch.js'
import { secretMaterial } from './canaries/canary-secret.js'
import type { PromptTemplate } from './canaries/canary-template.js'
import { DecoyPool } from './canary-decoy-pool.js'
import { DecoyDraftRows } from './canary-decoy-speculative.js'
import type { CanaryMaterial } from './canary-decoys.js'
import { laneKey, type ProbeDeps, probeChain, probeHop, retireLanes } from './canary-probes.js'
import { HopClasses, PeerScores } from './canary-scores.js'
import type { CanaryEvidence, CanaryMonitorOptions, CanaryPeerReport, StepContext } from './canary-types.js'
import { type DecoyGate, DecoyLauncher, pacerFor } from './decoy-launcher.js'
import { OwnStepChecks } from './own-step-replay.js'
import { ReceiptLedger } from './receipts.js'
import { RedundancySchedule } from './redundancy-schedule.js'
import { probeRelayRoute, relayRouteKey } from './relay-decoy.js'
import { ReplayIndex } from './replay-index.js'
import { SpanReplay } from './span-replay.js'
import { restoreTrustFile, saveTrustFile } from './trust-file.js'

export type { CanaryEvidence, CanaryOptions, CanaryPeerReport, StepContext } from './canary-types.js'

/**
 * Canary mixing and verdicts (docs/design.md §5, docs/verification.md). After each real step, the route gets a step of a
 * decoy session with the probability its most-wanted hop's adaptive rate gives (dense for peers
 * not yet checked or suspect, the base rate for peers with a clean record); the step goes out
 * beside the next real step (client/verification/canary-schedule.ts, issue #39). A decoy is an ordinary-looking
 * session (same wire dtype and max length as the real one, a prompt-sized first step, then one row
 * per step) whose inputs are a real prompt's hidden states at the route's boundary and whose
 * outputs the client knows, computed with its own trusted kernels. In chained forwarding a decoy
 * is chained over the whole route like a real session (chained-decoy.ts); relayed, it spans the
 * route hop by hop, each hop its own id, as a real relayed session does (relay-decoy.ts). The
 * drift of each answer feeds a sequential likelihood-ratio test per peer; a peer past the bound is excluded.
 * Canary steps run beside the real ones, off their critical path.
 */
export class CanaryMonitor {
  readonly detector: Detector
  readonly rates: AdaptiveRate
  private readonly benign: DriftModel
  private readonly probes: ProbeDeps
  private readonly material: CanaryMaterial
  private readonly pool: DecoyPool
  /** Chained decoys' scoring, per decoy in step order, waiting for their audit rounds. */
  private readonly scoring = new Map<string, Promise<void>>()
  private readonly random: Random
  /** Decoy steps in flight, and when they go out: beside the next real step (issue #39). */
  private readonly launcher: DecoyLauncher
  /** Scores of canary answers: the detector's observations, counts and the evidence of convictions. */
  private readonly scores: PeerScores
  /** Redundancy checks (the same decoy to two peers of one span), on a schedule. */
  private readonly redundancySchedule: RedundancySchedule
  /**
   * Every receipt the client checks (real steps through RemotePipeline's ledger, canary steps
   * through this one) goes to one index: a peer that signs one output for two inputs is convicted
   * there, on the first replayed step, and excluded like a canary conviction (replay-index.ts).
   */
  readonly replays = new ReplayIndex()
  /** Canary steps are signed like any other: a convicted peer's receipt is the evidence. */
  readonly receipts: ReceiptLedger
  /** Canary and real steps seen (for the overhead report). */
  readonly counts = { realSteps: 0, canarySteps: 0, canaryComputeMs: 0 }
  /** Audits of chained steps (real and decoy alike), sent in rounds. */
  readonly audits: AuditBatcher
  /** Peers the trust file says were convicted (the client keeps them out of routes). */
  readonly restoredExcluded: string[] = []
  /** The trust file to write at close (unset when there is none, or it could not be read). */
  private trustFile?: string
  /** A hop's wire and drift class (the model's matrices make the fast kernels quantise activations, benignClassKey). */
  private readonly hops: HopClasses
  /** Relayed decoys' later hops, replayed on what they were fed (client/verification/span-replay.ts). */
  private readonly replay?: SpanReplay
  /** Real sessions replayed while no canary exists (issue 31, own-step-replay.ts). */
  readonly ownSteps: OwnStepChecks

  constructor(
    host: Host,
    model: ModelFile,
    private readonly modelId: string,
    private readonly options: CanaryMonitorOptions
  ) {
    this.receipts = new ReceiptLedger(modelId, this.replays)
    this.hops = new HopClasses(quantizedWeights(model), options.wireDtype)
    // a thin client (canary bank) holds no middle block to replay a span with
    this.replay = options.bank ? undefined : new SpanReplay(model, options.kernels)
    this.benign = options.benign ?? defaultBenignModel()
    this.detector = createDetector({ benign: this.benign, prior: options.prior, bound: options.bound })
    const base = options.rate ?? DEFAULT_CANARY_RATE
    this.rates = options.adaptive === false ? fixedRate(base) : createAdaptiveRate({ ...options.adaptive, base })
    // grown in slices between real steps, so a growth never holds a generation (canary-trace-store.ts)
    const made = secretMaterial(model, modelId, {
      ...options,
      inSlices: true,
      onBuildError: (err) => options.log?.({ event: 'canary-build-error', code: errorCode(err), message: err.message })
    })
    this.material = made.material
    this.random = made.random
    // what the probes call is bound to the file that does it (the canary walk, docs/design.md §1.3)
    const setFor = this.material.setFor.bind(this.material)
    const { classOf, wireOf } = this.hops
    this.scores = new PeerScores(this.detector, modelId, { classOf, wireOf, setFor }, this.replays)
    this.launcher = new DecoyLauncher(pacerFor(base, this.random), { isOut: this.scores.isOut, log: options.log })
    this.pool = new DecoyPool(
      this.material,
      new DecoyDraftRows(model, { kernels: options.kernels, edge: options.edge, first: options.first })
    )
    this.audits = new AuditBatcher(options.auditEvery)
    if (options.trustFile !== undefined) {
      const excluded = restoreTrustFile(options.trustFile, modelId, this.benign, this.detector, options.log)
      if (excluded) {
        this.restoredExcluded.push(...excluded)
        this.trustFile = options.trustFile
      }
    }
    this.probes = {
      ...{ host, modelId, benign: this.benign, pool: this.pool, audits: this.audits, receipts: this.receipts },
      ...{ counts: this.counts, scoring: this.scoring, log: options.log, replay: this.replay },
      ...{ setFor, wireOf, classOf },
      score: this.scores.score.bind(this.scores),
      noteConviction: this.scores.noteConviction
    }
    this.ownSteps = new OwnStepChecks({ ...this.probes, dim: model.config.dim, wanted: () => this.material.firstInBackground })
    const peersOf = options.peersOf
    const redundancyRate = options.redundancyRate ?? DEFAULT_REDUNDANCY_RATE
    const partners = peersOf && redundancyRate > 0
    this.redundancySchedule = new RedundancySchedule(
      partners
        ? {
            ...this.probes,
            peersOf,
            isExcluded: (p) => this.detector.verdict(p).excluded,
            plan: (b, peers) => this.material.plan(b, { forwarding: 'relay', maxLength: options.maxLength }, peers),
            pick: (n) => this.random.int(n)
          }
        : undefined,
      redundancyRate,
      this.counts,
      options.log
    )
  }

  /** Why peers were excluded: the canary that convicted each and the receipt it signed for it. */
  get evidence(): readonly CanaryEvidence[] {
    return this.scores.evidence
  }

  /** A real prompt's tokens: secret canary prompts follow the client's (openings, chat template). */
  observePrompt(tokens: readonly number[], bosId: number, o: { special?: boolean; template?: PromptTemplate } = {}): void {
    this.material.observePrompt(tokens, bosId, o)
  }

  /** No canary yet: the first set is building in the background (a slow model's, issue 31). */
  get canariesPending(): boolean {
    return this.material.firstPending
  }

  /** The canary set build under way (a slow model's first, in the background), done: at every free turn from now on. */
  async canariesReady(options: { signal?: AbortSignal } = {}): Promise<void> {
    await this.material.settled({ ...options, hurry: true })
  }

  /** The canary set at a boundary (built on first use). */
  setFor(boundary: number): CanarySet {
    return this.material.setFor(boundary)
  }

  /** The base rate (peers with a clean record). */
  get rate(): number {
    return this.rates.base
  }

  /** The current canary rate of a peer. */
  rateOf(peerId: string): number {
    return this.rates.rateFor(this.detector.verdict(peerId))
  }

  /**
   * After a real step on `route`: start canary steps (in the background) on the hops whose rate
   * draws one. Returns the peers convicted since the last call.
   */
  async afterStep(
    route: readonly HopTarget[],
    ctx: StepContext = { forwarding: 'relay', maxLength: this.options.maxLength }
  ): Promise<string[]> {
    this.counts.realSteps++
    if (route.length === 0) return this.takeExcluded()
    // The canary set is prepared at a session's first step, not at its first canary, which at a
    // trusted peer's base rate can fall in the middle of a generation; a slow model's first set is
    // built in the background (issue 31), decoys waiting for it.
    this.material.prepare(route[0].start, ctx.maxLength)
    this.material.observeStep(ctx, this.hops.wireOf(route[0]))
    const chained = ctx.forwarding === 'chain' && route.length > 1
    if (!chained)
      for (const hop of route)
        if (this.redundancySchedule.wants(() => this.random.next()))
          this.launcher.launch(`redundancy/${hop.start}/${hop.end}`, () => this.redundancySchedule.check(hop, ctx), false)
    // One decoy covers the route, chained or relayed with an id per hop (relay-decoy.ts, issue
    // #39), at the rate (and decoys in flight) of its most-wanted hop.
    const rate = Math.max(...route.map((h) => this.rateOf(h.peerId)))
    const lanes = Math.max(...route.map((h) => this.lanesOf(h.peerId)))
    const key = chained ? route.map((h) => `${h.peerId}/${h.start}/${h.end}`).join('>') : relayRouteKey(route)
    const peers = route.map((h) => h.peerId)
    for (let lane = 0; lane < lanes; lane++)
      if (this.random.next() < rate) {
        const k = laneKey(key, lane)
        const run = (gate: DecoyGate) =>
          chained ? probeChain(this.probes, route, ctx, lane, gate) : probeRelayRoute(this.probes, route, ctx, k, gate)
        this.launcher.launch(k, run, true, peers)
      }
    retireLanes(this.probes, this.launcher.inflight, key, lanes, this.rates.inFlight)
    return this.takeExcluded()
  }

  /**
   * Decoy sessions of a peer in flight at once (canary/adaptive-rate.ts): several while it is
   * below the evidence threshold, so a new client's burst (and a suspect's checks) take a few
   * real steps rather than one per canary; each is a session of its own, like another client's.
   */
  lanesOf(peerId: string): number {
    return this.rates.lanes(this.detector.verdict(peerId))
  }

  /** Peers convicted since the last call, by canary drift or by replayed receipts. */
  private takeExcluded(): string[] {
    const convicted = [...new Set([...this.scores.takeConvicted(), ...this.replays.takeConvicted()])]
    // a convicted peer's decoys get no further step: their sessions end now, not at close
    if (convicted.length > 0) this.audits.round()
    for (const p of convicted) this.pool.releasePeer(p, this.scoring)
    return convicted
  }

  /**
   * Wait for the canary steps in flight; the peers they convicted (not yet returned by afterStep).
   * With a session id, that real session has ended: decoys may copy its shape from now on.
   */
  async settle(sessionId?: string): Promise<string[]> {
    if (sessionId !== undefined) this.material.endSession(sessionId)
    // no real step follows for the decoy steps waiting to go out beside one: they go now
    await this.launcher.drain(() =>
      this.audits.drain(async () => {
        await Promise.all(this.launcher.inflight.values())
        await Promise.all(this.scoring.values())
      })
    )
    return this.takeExcluded()
  }

  /** A real step is about to go out: decoy steps drawn since the last go beside it or before it (decoy-launcher.ts). */
  beforeStep(sessionId?: string): Promise<void> {
    return this.launcher.beforeStep(sessionId)
  }

  /** Send one canary step to a hop (relayed) and score its answer (client/verification/canary-probes.ts). */
  probe(target: HopTarget, ctx: StepContext, lane = 0): Promise<PeerVerdict[]> {
    return probeHop(this.probes, target, ctx, lane)
  }

  /** One step of a decoy chained over the whole route, each hop scored (client/verification/canary-probes.ts). */
  probeChained(route: readonly HopTarget[], ctx: StepContext, lane = 0, gate?: DecoyGate): Promise<PeerVerdict[]> {
    return probeChain(this.probes, route, ctx, lane, gate)
  }

  report(): CanaryPeerReport[] {
    return this.scores.report()
  }

  async close(): Promise<void> {
    this.material.close()
    await this.settle()
    await this.pool.closeAll()
    this.replay?.close()
    if (this.trustFile !== undefined) saveTrustFile(this.trustFile, this.modelId, this.benign, this.detector, this.options.log)
  }
}
