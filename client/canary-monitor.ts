import {
  type AdaptiveRate,
  benignClassKey,
  CanaryArgumentError,
  CanaryBankMismatchError,
  type CanarySet,
  type CanaryTraces,
  createAdaptiveRate,
  createDetector,
  createRandom,
  DEFAULT_CANARY_RATE,
  type Detector,
  type Drift,
  type DriftModel,
  defaultBenignModel,
  densityRatio,
  driftMetrics,
  fixedRate,
  inputFor,
  type PeerVerdict,
  quantizedWeights,
  type Random,
  referenceFor
} from '../canary/index.js'
import type { DType, Host, Receipt } from '../protocol/index.js'
import type { Edge, Kernels, ModelFile, Shard } from '../shards/index.js'
import { AuditBatcher } from './audit-batch.js'
import { DecoyDraftRows } from './canary-decoy-speculative.js'
import { CanaryMaterial, type Decoy, DecoyPool, decoyDone } from './canary-decoys.js'
import { loadOrCreateSecret, randomSecret, secretPrompts, secretSeed } from './canary-secret.js'
import type { CanaryEvidence, CanaryOptions, CanaryPeerReport, StepContext } from './canary-types.js'
import { ChainedDecoy } from './chained-decoy.js'
import { HopSession, type HopTarget } from './hop.js'
import { DEFAULT_REDUNDANCY_RATE } from './options.js'
import { ReceiptLedger } from './receipts.js'
import { type RedundancyDeps, type RedundancyRecord, scheduledCrossCheck } from './redundancy-schedule.js'
import { ReplayIndex } from './replay-index.js'
import { detectorFingerprint, loadTrust, saveTrust } from './trust-file.js'

export type { CanaryEvidence, CanaryOptions, CanaryPeerReport, StepContext } from './canary-types.js'

/**
 * Canary mixing and verdicts (DESIGN.md §5). After each real step, each hop of the route gets a
 * step of a decoy session with the probability its adaptive rate gives (dense for peers not yet
 * checked or suspect, the base rate for peers with a clean record). A decoy is an ordinary-looking
 * session (same wire dtype and max length as the real one, a prompt-sized first step, then one row
 * per step) whose inputs are a real prompt's hidden states at the route's boundary and whose
 * outputs the client knows, computed with its own trusted kernels. In chained forwarding a decoy
 * is chained over the whole route like a real session (chained-decoy.ts). The drift of each
 * answer feeds a sequential likelihood-ratio test per peer; a peer past the bound is excluded.
 * Canary steps run beside the real ones, off their critical path.
 */
export class CanaryMonitor {
  readonly detector: Detector
  readonly rates: AdaptiveRate
  private readonly benign: DriftModel
  private readonly material: CanaryMaterial
  private readonly pool: DecoyPool
  private readonly inflight = new Map<string, Promise<void>>()
  /** Chained decoys' scoring, per decoy in step order, waiting for their audit rounds. */
  private readonly scoring = new Map<string, Promise<void>>()
  private readonly newlyExcluded: string[] = []
  private readonly sent = new Map<string, number>()
  private readonly last = new Map<string, Drift>()
  private readonly random: Random
  readonly evidence: CanaryEvidence[] = []
  /** Redundancy checks run (the same decoy to two peers of one span). */
  readonly redundancy: RedundancyRecord[] = []
  private readonly redundancyDeps?: RedundancyDeps
  /**
   * Every receipt the client checks (real steps through RemotePipeline's ledger, canary steps
   * through this one) goes to one index: a peer that signs one output for two inputs is convicted
   * there, on the first replayed step, and excluded like a canary conviction (replay-index.ts).
   */
  readonly replays = new ReplayIndex()
  /** Canary steps are signed like any other: a convicted peer's receipt is the evidence. */
  readonly receipts = new ReceiptLedger(this.replays)
  /** Canary and real steps seen (for the overhead report). */
  readonly counts = { realSteps: 0, canarySteps: 0, canaryComputeMs: 0 }
  /** Audits of chained steps (real and decoy alike), sent in rounds. */
  readonly audits: AuditBatcher
  /** Peers the trust file says were convicted (the client keeps them out of routes). */
  readonly restoredExcluded: string[] = []
  /** The trust file to write at close (unset when there is none, or it could not be read). */
  private trustFile?: string
  /** Whether the model's matrices make the fast kernels quantise activations (benignClassKey). */
  private readonly quantized: boolean

  constructor(
    private readonly host: Host,
    model: ModelFile,
    private readonly modelId: string,
    private readonly options: CanaryOptions & {
      wireDtype: DType
      maxLength: number
      kernels?: Kernels
      log?: (e: Record<string, unknown>) => void
      /** A canary bank (a thin client's canaries): no canary is built on the client. */
      bank?: CanaryTraces
      /** Progress of building a canary set: (boundary, canaries built, canaries in the set). */
      onBuild?: (boundary: number, built: number, total: number) => void
      /** The client's embeddings and first blocks: speculative decoys' rejected drafts run through them. */
      edge?: Edge
      first?: Shard
      /** Peers serving exactly [start, end) that routes may use: partners for redundancy checks. */
      peersOf?: (start: number, end: number) => readonly HopTarget[]
    }
  ) {
    this.quantized = quantizedWeights(model)
    this.benign = options.benign ?? defaultBenignModel()
    this.detector = createDetector({ benign: this.benign, prior: options.prior, bound: options.bound })
    const base = options.rate ?? DEFAULT_CANARY_RATE
    this.rates = options.adaptive === false ? fixedRate(base) : createAdaptiveRate({ ...options.adaptive, base })
    // Public canaries only when a seed is given; otherwise everything derives from the secret.
    const secret =
      options.seed !== undefined && !options.secret && !options.secretFile
        ? undefined
        : (options.secret ?? (options.secretFile ? loadOrCreateSecret(options.secretFile) : randomSecret()))
    const seed = secret ? secretSeed(secret, 'traces') : options.seed
    this.random = createRandom(secret ? secretSeed(secret, 'mixing') : (options.seed ?? Date.now()))
    if (options.bank && options.bank.modelId !== modelId) {
      throw new CanaryBankMismatchError(`the canary bank was built for model ${options.bank.modelId}, not ${modelId}`)
    }
    this.material = new CanaryMaterial(model, {
      bank: options.bank,
      kernels: options.kernels,
      prompts: options.prompts,
      promptsFrom: secret
        ? () => secretPrompts(model, secret, { count: options.count ?? 8, corpus: options.corpus, kernels: options.kernels })
        : undefined,
      seed,
      length: options.length,
      maxLength: options.maxLength,
      onBuild: options.onBuild
    })
    this.pool = new DecoyPool(
      this.material,
      new DecoyDraftRows(model, { kernels: options.kernels, edge: options.edge, first: options.first })
    )
    this.audits = new AuditBatcher(options.auditEvery)
    if (options.trustFile !== undefined) this.restoreTrust(options.trustFile)
    const redundancyRate = options.redundancyRate ?? DEFAULT_REDUNDANCY_RATE
    if (!(redundancyRate >= 0 && redundancyRate <= 1))
      throw new CanaryArgumentError(`redundancyRate must be in [0, 1], got ${redundancyRate}`)
    const peersOf = options.peersOf
    if (peersOf && redundancyRate > 0)
      this.redundancyDeps = {
        host,
        modelId,
        benign: this.benign,
        peersOf,
        isExcluded: (p) => this.detector.verdict(p).excluded,
        setFor: (b) => this.setFor(b),
        plan: (b) => this.material.plan(b, { forwarding: 'relay', maxLength: options.maxLength }),
        wireOf: (t) => this.wireOf(t),
        pick: (n) => this.random.int(n),
        score: (...a) => this.score(...a)
      }
  }

  /**
   * A redundancy check of a hop (relayed): the same decoy to it and to another peer of its span,
   * each answer scored as a canary's; recorded and logged (`redundancy`). None without a partner.
   */
  async crossCheck(hop: HopTarget, ctx: StepContext): Promise<PeerVerdict[]> {
    if (!this.redundancyDeps) return []
    const got = await scheduledCrossCheck(hop, this.redundancyDeps, { signal: ctx.signal })
    if (!got) return []
    this.counts.canarySteps += 2 * got.record.steps
    this.redundancy.push(got.record)
    this.options.log?.({ event: 'redundancy', ...got.record })
    return got.verdicts
  }

  private restoreTrust(path: string): void {
    try {
      const records = loadTrust(path, this.modelId, detectorFingerprint(this.benign, this.detector))
      this.detector.restore(records)
      for (const r of records) if (r.excluded) this.restoredExcluded.push(r.peerId)
      this.trustFile = path
      this.options.log?.({ event: 'trust-file', path, peers: records.length, excluded: this.restoredExcluded.length })
    } catch (err) {
      // a file we cannot read is not ours to overwrite: evidence starts afresh, the file stays
      this.options.log?.({
        event: 'trust-file-ignored',
        path,
        code: (err as { code?: string }).code,
        message: (err as Error).message
      })
    }
  }

  /** Positions per canary: how long a decoy session can run. */
  get canaryLength(): number {
    return this.material.length
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
    if (route.length > 0) {
      // The canary set is built on first use (the whole model over every canary, seconds on a
      // large one, synchronous): at a session's first step, not at its first canary, which at a
      // trusted peer's base rate can fall in the middle of a generation and stall it.
      this.material.setFor(route[0].start, ctx.maxLength)
      this.material.observeStep(ctx, this.wireOf(route[0]))
    }
    if (ctx.forwarding === 'chain' && route.length > 1) {
      // One chained decoy covers the whole route: at the rate (and decoys in flight) of its most-wanted hop.
      const rate = Math.max(...route.map((h) => this.rateOf(h.peerId)))
      const lanes = Math.max(...route.map((h) => this.lanesOf(h.peerId)))
      const key = route.map((h) => `${h.peerId}/${h.start}/${h.end}`).join('>')
      for (let lane = 0; lane < lanes; lane++)
        if (this.random.next() < rate) this.launch(laneKey(key, lane), () => this.probeChained(route, ctx, lane))
      this.retireLanes(key, lanes)
    } else {
      for (const hop of route) {
        if (this.redundancyDeps && this.random.next() < (this.options.redundancyRate ?? DEFAULT_REDUNDANCY_RATE))
          this.launch(`redundancy/${hop.start}/${hop.end}`, () => this.crossCheck(hop, ctx))
        const lanes = this.lanesOf(hop.peerId)
        for (let lane = 0; lane < lanes; lane++)
          if (this.random.next() < this.rateOf(hop.peerId))
            this.launch(laneKey(`${hop.peerId}/${hop.start}/${hop.end}`, lane), () => this.probe(hop, ctx, lane))
        this.retireLanes(`${hop.peerId}/${hop.start}/${hop.end}`, lanes)
      }
    }
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

  /** Once a peer needs fewer decoys in flight, the extra ones' sessions end (after their step in flight). */
  private retireLanes(key: string, lanes: number): void {
    for (let lane = Math.max(1, lanes); lane < this.rates.inFlight; lane++) {
      const k = laneKey(key, lane)
      if (this.inflight.has(k) || !this.pool.has(k)) continue
      // as at a decoy's planned end: its last steps' audits go out in a round before it closes,
      // so every step of a decoy is audited, as every real step is
      this.audits.round()
      this.pool.release(k, this.scoring.get(k) ?? Promise.resolve())
    }
  }

  /** A verdict that has just convicted its peer (on this very observation) is reported once. */
  private noteConviction(v: PeerVerdict): void {
    if (v.excluded && v.excludedAfter === v.observations) this.newlyExcluded.push(v.peerId)
  }

  /** Peers convicted since the last call, by canary drift or by replayed receipts. */
  private takeExcluded(): string[] {
    return [...new Set([...this.newlyExcluded.splice(0), ...this.replays.takeConvicted()])]
  }

  /** Why a peer was excluded, for the log. */
  whyExcluded(peerId: string): 'replayed output' | 'canary drift' {
    return this.replays.isConvicted(peerId) ? 'replayed output' : 'canary drift'
  }

  /**
   * Wait for the canary steps in flight; the peers they convicted (not yet returned by afterStep).
   * With a session id, that real session has ended: decoys may copy its shape from now on.
   */
  async settle(sessionId?: string): Promise<string[]> {
    if (sessionId !== undefined) this.material.endSession(sessionId)
    await this.audits.drain(async () => {
      await Promise.all(this.inflight.values())
      await Promise.all(this.scoring.values())
    })
    return this.takeExcluded()
  }

  /** At most one canary step in flight per decoy: the next waits, as a real session's steps do. */
  private launch(key: string, run: () => Promise<PeerVerdict[]>): void {
    if (this.inflight.has(key)) return
    const p = run()
      .then((verdicts) => {
        for (const v of verdicts) this.noteConviction(v)
      })
      // A hop that fails a canary step is the real path's to report; note it and go on.
      .catch((err: Error) =>
        this.options.log?.({ event: 'canary-error', key, code: (err as { code?: string }).code, message: err.message })
      )
      .finally(() => this.inflight.delete(key))
    this.inflight.set(key, p)
  }

  /** Send one canary step to a hop (relayed) and score its answer. */
  async probe(target: HopTarget, ctx: StepContext, lane = 0): Promise<PeerVerdict[]> {
    const key = laneKey(`${target.peerId}/${target.start}/${target.end}`, lane)
    const decoy = await this.pool.decoyFor(key, [target], ctx, async (sessionId, maxLength) => ({
      hop: await HopSession.open(
        this.host,
        target,
        this.setFor(target.start).dim,
        { sessionId, modelId: this.modelId, maxLength, wireDtype: this.wireOf(target) },
        { signal: ctx.signal }
      )
    }))
    const set = this.setFor(target.start)
    return await this.pool.stepDecoy(
      key,
      decoy,
      async (step, stepId) => {
        // a speculative decoy's rows after its first rejected draft are not the canary's: not scored
        const { startPosition: position, scored: rows } = step
        const input = this.pool.draftRows!.input(set, decoy.canary, target.start, decoy.spec, step)
        const out = await decoy.hop!.step(stepId, position, input, { signal: ctx.signal })
        await this.receipts.check([target], decoy.sessionId, stepId, out.receipts, out.sent, out.received)
        this.counts.canarySteps++
        this.counts.canaryComputeMs += out.timings[0]?.computeMs ?? 0
        const reference = referenceFor(set, decoy.canary, target.end, position, rows)
        const output = out.hidden.subarray(0, rows * set.dim)
        return [this.score(target, decoy, stepId, position, rows, output, reference, out.receipts[0])]
      },
      ctx.draftLength
    )
  }

  /**
   * One step of a decoy chained over the whole route. Each hop's output is scored against the
   * reference at its span end; once a hop's answer looks like tampering (density ratio above 1),
   * the hops after it got an altered input, so they are not scored for the rest of this decoy.
   */
  async probeChained(route: readonly HopTarget[], ctx: StepContext, lane = 0): Promise<PeerVerdict[]> {
    const key = laneKey(route.map((h) => `${h.peerId}/${h.start}/${h.end}`).join('>'), lane)
    const decoy = await this.pool.decoyFor(key, route, ctx, async (sessionId, maxLength) => ({
      chain: await ChainedDecoy.open(
        this.host,
        route,
        this.setFor(route[0].start).dim,
        { sessionId, modelId: this.modelId, maxLength, wireDtype: this.wireOf(route[0]) },
        { signal: ctx.signal }
      )
    }))
    const set = this.setFor(route[0].start)
    const { out, position, rows, stepId } = await this.pool.stepDecoy(
      key,
      decoy,
      async (step, stepId) => {
        const input = this.pool.draftRows!.input(set, decoy.canary, route[0].start, decoy.spec, step)
        const audit = this.audits.audit.bind(this.audits, 'decoy')
        const got = await decoy.chain!.step(stepId, step.startPosition, input, set.dim, this.receipts, audit, {
          signal: ctx.signal
        })
        // only the canary's own rows are scored (a speculative decoy's rejected drafts are not)
        return { out: got, position: step.startPosition, rows: step.scored, stepId }
      },
      ctx.draftLength
    )
    this.counts.canarySteps += route.length
    this.counts.canaryComputeMs += out.computeMs
    // Scored once the middle hops' outputs come with their audit round, in the decoy's step order
    // (a hop found tampering taints the inputs of the hops after it for the rest of the decoy).
    const scored = (this.scoring.get(key) ?? Promise.resolve())
      .then(async () => {
        const outputs = [...(await out.middle), out.last].map((o) => o.subarray(0, rows * set.dim))
        for (let i = 0; i < Math.min(route.length, decoy.taintedFrom + 1); i++) {
          const reference = referenceFor(set, decoy.canary, route[i].end, position, rows)
          const v = this.score(route[i], decoy, stepId, position, rows, outputs[i], reference, out.receipts[i])
          this.noteConviction(v)
          if (
            decoy.taintedFrom === route.length &&
            densityRatio(this.benign, driftMetrics(outputs[i], reference), this.classOf(route[i]), position + rows) > 1
          )
            decoy.taintedFrom = i
        }
      })
      .catch((err: Error) =>
        this.options.log?.({ event: 'canary-error', key, code: (err as { code?: string }).code, message: err.message })
      )
    this.scoring.set(key, scored)
    scored.finally(() => {
      if (this.scoring.get(key) === scored) this.scoring.delete(key)
    })
    if (decoyDone(decoy)) {
      // The decoy's session ends here: as a real one's end does (RemotePipeline.close), its last
      // audits go out now, in a round for every session, and the session closes after them.
      this.audits.round()
      this.pool.retire(key, decoy, scored)
    }
    return []
  }

  /** The wire dtype a hop was negotiated (a decoy uses it, as the real session does). */
  /** The benign drift class of a hop: its wire, the model's weights, its announced KV dtype. */
  private classOf(target: HopTarget): string {
    return benignClassKey(this.wireOf(target), target.kvDtype, this.quantized)
  }

  private wireOf(target: HopTarget): DType {
    return (target as HopTarget & { wireDtype?: DType }).wireDtype ?? this.options.wireDtype
  }

  private score(
    target: HopTarget,
    decoy: Pick<Decoy, 'sessionId' | 'canary'>,
    stepId: number,
    position: number,
    rows: number,
    output: Float32Array,
    reference: Float32Array,
    receipt?: Receipt
  ): PeerVerdict {
    const drift = driftMetrics(output, reference)
    this.sent.set(target.peerId, (this.sent.get(target.peerId) ?? 0) + 1)
    this.last.set(target.peerId, drift)
    const before = this.detector.verdict(target.peerId).excluded
    // Scored against benign drift at the step's own position (benign drift grows with KV length).
    // In the class of the hop's wire and announced KV dtype (a q8_0 cache drifts more, benignly).
    const verdict = this.detector.observe(target.peerId, drift, this.classOf(target), position + rows)
    if (verdict.excluded && !before) {
      this.evidence.push({
        peerId: target.peerId,
        span: [target.start, target.end],
        sessionId: decoy.sessionId,
        stepId,
        position,
        rows,
        drift,
        posterior: verdict.posterior,
        receipt,
        modelId: this.modelId,
        wire: this.wireOf(target),
        // copies: what a third party needs to recompute the step (client/evidence.ts)
        input: inputFor(this.setFor(target.start), decoy.canary, 0, position + rows).slice(),
        output: output.slice()
      })
    }
    return verdict
  }

  report(): CanaryPeerReport[] {
    return this.detector
      .report()
      .map((v) => ({ ...v, canariesSent: this.sent.get(v.peerId) ?? 0, lastDrift: this.last.get(v.peerId) }))
  }

  async close(): Promise<void> {
    await this.settle()
    await this.pool.closeAll()
    if (this.trustFile === undefined) return
    try {
      saveTrust(this.trustFile, this.modelId, detectorFingerprint(this.benign, this.detector), this.detector.records())
    } catch (err) {
      this.options.log?.({ event: 'trust-file-unsaved', path: this.trustFile, message: (err as Error).message })
    }
  }
}

/** The decoy of one lane: lane 0 is the decoy a peer always has, lanes 1+ only below the threshold. */
function laneKey(key: string, lane: number): string {
  return lane === 0 ? key : `${key}#${lane}`
}
