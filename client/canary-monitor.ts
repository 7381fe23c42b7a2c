import { randomUUID } from 'node:crypto'
import {
  buildCanarySet,
  type CanarySet,
  createDetector,
  createRandom,
  DEFAULT_CANARY_PROMPTS,
  defaultBenignModel,
  type Detector,
  type Drift,
  type DriftModel,
  driftMetrics,
  inputFor,
  type PeerVerdict,
  type Random,
  referenceFor
} from '../canary/index.js'
import type { DType, Host, Receipt } from '../protocol/index.js'
import { createReferenceKernels, type Kernels, type ModelFile } from '../shards/index.js'
import { wireName } from './wire.js'
import { HopSession, type HopTarget } from './hop.js'
import { ReceiptLedger } from './receipts.js'

export interface CanaryOptions {
  /** Fraction of real steps after which each hop also gets a canary step (default 0.03). */
  readonly rate?: number
  /** Prior P(tampering) of a peer (default 0.01). */
  readonly prior?: number
  /** Posterior at which a peer is excluded (default 0.99). */
  readonly bound?: number
  readonly seed?: number
  /** Benign drift model; the project's calibration by default. */
  readonly benign?: DriftModel
  /** Real prompts the canaries are made of (default: 4 of the built-in TinyStories-like ones). */
  readonly prompts?: readonly string[]
}

/** Why a peer was excluded: the canary that convicted it and the receipt it signed for it. */
export interface CanaryEvidence {
  readonly peerId: string
  readonly span: [number, number]
  readonly sessionId: string
  readonly stepId: number
  readonly drift: Drift
  readonly posterior: number
  readonly receipt?: Receipt
}

export interface CanaryPeerReport extends PeerVerdict {
  readonly canariesSent: number
  readonly lastDrift?: Drift
}

interface Decoy {
  readonly hop: HopSession
  readonly sessionId: string
  readonly canary: number
  position: number
  stepId: number
}

/**
 * Canary mixing and verdicts (DESIGN.md §5). After real steps, at the configured rate, each
 * hop of the route also gets a step of a decoy session: an ordinary-looking session (same
 * wire dtype and max length, a prompt-sized first step, then one row per step) whose inputs
 * are a real prompt's hidden states at the hop's boundary and whose outputs the client knows,
 * computed here with the trusted reference kernels. The drift of each answer feeds a
 * sequential likelihood-ratio test per peer; a peer past the bound is excluded.
 */
export class CanaryMonitor {
  readonly detector: Detector
  private readonly sets = new Map<number, CanarySet>()
  private readonly decoys = new Map<string, Decoy>()
  private readonly sent = new Map<string, number>()
  private readonly last = new Map<string, Drift>()
  private readonly random: Random
  readonly evidence: CanaryEvidence[] = []
  /** Canary steps are signed like any other: a convicted peer's receipt is the evidence. */
  readonly receipts = new ReceiptLedger()
  private nextCanary = 0

  constructor(
    private readonly host: Host,
    private readonly model: ModelFile,
    private readonly modelId: string,
    private readonly options: CanaryOptions & {
      wireDtype: DType
      maxLength: number
      kernels?: Kernels
      log?: (e: Record<string, unknown>) => void
      /** Progress of building a canary set: (boundary, canaries built, canaries in the set). */
      onBuild?: (boundary: number, built: number, total: number) => void
    }
  ) {
    this.detector = createDetector({ benign: options.benign ?? defaultBenignModel(), prior: options.prior, bound: options.bound })
    this.random = createRandom(options.seed ?? Date.now())
  }

  get rate(): number {
    return this.options.rate ?? 0.03
  }

  /** After a real step on `route`: maybe probe its hops. Returns peers excluded by this call. */
  async afterStep(route: readonly HopTarget[], signal?: AbortSignal): Promise<string[]> {
    const excluded: string[] = []
    for (const hop of route) {
      if (this.random.next() >= this.rate) continue
      // A hop that fails a canary step is the real path's to report; note it and go on.
      const verdict = await this.probe(hop, signal).catch((err: Error) => {
        this.options.log?.({ event: 'canary-error', peerId: hop.peerId, code: (err as { code?: string }).code, message: err.message })
        return undefined
      })
      if (verdict?.excluded) excluded.push(hop.peerId)
    }
    return excluded
  }

  /** Send one canary step to a hop and score its answer. */
  async probe(target: HopTarget, signal?: AbortSignal): Promise<PeerVerdict> {
    const key = `${target.peerId}/${target.start}/${target.end}`
    const set = this.setFor(target.start)
    let decoy = this.decoys.get(key)
    const canary = decoy ? set.canaries[decoy.canary] : set.canaries[this.nextCanary % set.canaries.length]
    if (!decoy || decoy.position >= canary.tokens.length) {
      if (decoy) await decoy.hop.close(decoy.sessionId)
      const sessionId = randomUUID()
      const hop = await HopSession.open(this.host, target, set.dim, {
        sessionId,
        modelId: this.modelId,
        maxLength: Math.max(this.options.maxLength, canary.tokens.length),
        // a decoy looks like the real session on this hop: its negotiated dtype
        wireDtype: target.wireDtype ?? this.options.wireDtype,
        signal
      })
      decoy = { hop, sessionId, canary: this.nextCanary++ % set.canaries.length, position: 0, stepId: 1 }
      this.decoys.set(key, decoy)
    }
    const c = set.canaries[decoy.canary]
    // The first step of a decoy is its prompt, as a real session's prefill; then one row a step.
    const rows = decoy.position === 0 ? c.promptLength : 1
    const input = inputFor(set, decoy.canary, decoy.position, rows)
    const stepId = decoy.stepId++
    const out = await decoy.hop.step(decoy.sessionId, stepId, decoy.position, input, signal)
    await this.receipts.check([target], decoy.sessionId, stepId, out.receipts, out.sent, out.received)
    const reference = referenceFor(set, decoy.canary, target.end, decoy.position, rows)
    decoy.position += rows
    const drift = driftMetrics(out.hidden, reference)
    this.sent.set(target.peerId, (this.sent.get(target.peerId) ?? 0) + 1)
    this.last.set(target.peerId, drift)
    const before = this.detector.verdict(target.peerId).excluded
    const verdict = this.detector.observe(target.peerId, drift, wireName(decoy.hop.wireDtype))
    if (verdict.excluded && !before) {
      this.evidence.push({
        peerId: target.peerId, span: [target.start, target.end], sessionId: decoy.sessionId, stepId, drift,
        posterior: verdict.posterior, receipt: out.receipts[0]
      })
    }
    return verdict
  }

  /** Canary inputs at a boundary, with references for every span end after it (built once, kept in memory only). */
  private setFor(boundary: number): CanarySet {
    let set = this.sets.get(boundary)
    if (!set) {
      const n = this.model.config.nLayers
      const ends = Array.from({ length: n - boundary }, (_, i) => boundary + i + 1)
      // The client is the trusted hardware: its own kernels compute the references. Building runs
      // the whole model over every canary (its continuation is sampled token by token), so the
      // default set is small; a longer-lived client can pass more prompts.
      set = buildCanarySet({
        model: this.model,
        kernels: this.options.kernels ?? createReferenceKernels(),
        boundary,
        ends,
        prompts: this.options.prompts ?? DEFAULT_CANARY_PROMPTS.slice(0, 4),
        seed: this.options.seed ?? 1,
        onProgress: (built, total) => this.options.onBuild?.(boundary, built, total)
      })
      this.sets.set(boundary, set)
    }
    return set
  }

  report(): CanaryPeerReport[] {
    return this.detector.report().map((v) => ({ ...v, canariesSent: this.sent.get(v.peerId) ?? 0, lastDrift: this.last.get(v.peerId) }))
  }

  async close(): Promise<void> {
    await Promise.all([...this.decoys.values()].map((d) => d.hop.close(d.sessionId)))
    this.decoys.clear()
  }
}
