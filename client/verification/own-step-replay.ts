import { type DriftModel, densityRatio, driftMetrics, type PeerVerdict } from '../../canary/index.js'
import type { Receipt } from '../../protocol/index.js'
import type { HopSession, HopTarget } from '../session/hop.js'
import type { ChainedStep, RelayedStep } from '../session/pipeline-observer.js'
import type { ProbeDeps } from './canary-probes.js'
import type { SpanReplay } from './span-replay.js'

/*
 * Issue 31 item 4: a new client's first canary set, on a big-vocabulary model, is built in the
 * background (every canary is sampled through the whole model and its 151k-row head), so its
 * first generation ended before any canary existed. Releasing that text unchecked let a
 * tamperer's tokens through (test/e2e/canary-chat.test.ts), and waiting for the whole set held
 * the end up to ~150 s on a loaded host. Instead, while no canary exists, the client checks the
 * generation's own relayed steps: it keeps what each hop was fed and answered, and at the
 * session's end runs each hop's span on those very rows with its own trusted kernels
 * (span-replay.ts, as relayed decoys' later hops are scored) and scores every step's drift with
 * the canary detector, in the hop's benign class. That costs the remote blocks once over the
 * session's rows (no LM head, no sampling): a 42m Qwen-vocabulary session of 36 positions is
 * ~0.7·10⁹ multiply-adds, against ~10¹¹ for the first set. A peer whose every step behind the
 * text was replayed and looked benign needs no canary for that text (verified-clear.ts); a
 * tamperer's steps convict it as canaries would, and the text is rolled back. Chained routes too
 * (session 4): the client has the first hop's input and the tail's answer, and each middle hop's
 * output from its audit (bound by receipts to what it forwarded), so every hop is replayed on its
 * own rows and a tail fed a tamperer's rows is not blamed (OwnStepSession.recordChained).
 */

/** Rows replayed per slice at a session's end: the event loop turns between slices. */
const REPLAY_SLICE_ROWS = 32

/** One step of a hop, as recorded: its rows may be cut later by a rewind (speculative drafts). */
interface RecordedStep {
  readonly stepId: number
  readonly position: number
  rows: number
  readonly receipt?: Receipt
}

/** What one hop session of a real session was fed and answered, by position (latest write wins). */
class HopRecord {
  inputs: Float32Array
  outputs: Float32Array
  length = 0
  /** A step began past the rows recorded (KV restored or replayed on a new hop): no full record. */
  gap = false
  readonly steps: RecordedStep[] = []

  constructor(
    readonly target: HopTarget,
    readonly sessionId: string,
    private readonly dim: number
  ) {
    this.inputs = new Float32Array(64 * dim)
    this.outputs = new Float32Array(64 * dim)
  }

  add(stepId: number, position: number, input: Float32Array, output: Float32Array, receipt?: Receipt): void {
    const { dim } = this
    const rows = input.length / dim
    if (position > this.length) this.gap = true
    // a step at `position` replaces every row from there on (a rewind), as the hop's KV does
    for (let i = this.steps.length - 1; i >= 0 && this.steps[i].position + this.steps[i].rows > position; i--) {
      const s = this.steps[i]
      if (s.position >= position) this.steps.splice(i, 1)
      else s.rows = position - s.position
    }
    const end = (position + rows) * dim
    if (end > this.inputs.length) {
      const grow = (a: Float32Array): Float32Array => {
        const b = new Float32Array(Math.max(end, 2 * a.length))
        b.set(a)
        return b
      }
      this.inputs = grow(this.inputs)
      this.outputs = grow(this.outputs)
    }
    this.inputs.set(input, position * dim)
    this.outputs.set(output.subarray(0, rows * dim), position * dim)
    this.length = position + rows
    this.steps.push({ stepId, position, rows, ...(receipt ? { receipt } : {}) })
  }
}

/** A chained route's steps: how many the pipeline completed, and how many came back audited. */
interface ChainedRoute {
  readonly hops: readonly HopSession[]
  expected: number
  recorded: number
}

/** One real session's relayed and chained steps, recorded hop session by hop session (CanaryObserver). */
export class OwnStepSession {
  readonly hops = new Map<string, HopRecord>()
  /** Chained steps wait for their middle hops' audits (they come back in rounds): kept, then recorded in step order. */
  private readonly chained: { step: ChainedStep; middles: readonly Float32Array[] }[] = []
  private readonly routes = new Map<string, ChainedRoute>()

  constructor(private readonly dim: number) {}

  record(step: RelayedStep): void {
    step.hops.forEach((hop, i) => {
      let rec = this.hops.get(hop.sessionId)
      // scored in the class of the wire this hop session was negotiated (the monitor's classOf reads it)
      const target = { ...hop.target, wireDtype: hop.wireDtype } as HopTarget
      if (!rec) this.hops.set(hop.sessionId, (rec = new HopRecord(target, hop.sessionId, this.dim)))
      rec.add(step.stepId, step.startPosition, step.inputs[i], step.outputs[i], step.receipts[i])
    })
  }

  /** A chained step of `hops` was completed: its record must come (recordChained) for them to be verified. */
  expect(hops: readonly HopSession[]): void {
    const key = hops[0].sessionId
    const route = this.routes.get(key) ?? { hops, expected: 0, recorded: 0 }
    route.expected++
    this.routes.set(key, route)
  }

  /**
   * A chained step and its middle hops' audited outputs, in route order (issue 31 item 4): hop i
   * was fed hop i−1's audited output (the client's own input for the first) and answered its own
   * (the last hop's answer for the last). An audited output hashes to what the hop signed and the
   * next hop signed as received (audit-batch.ts), so each hop is judged on its own rows: the
   * tail's answer alone would tell that the chain's span drifted, not which hop did it.
   */
  recordChained(step: ChainedStep, middles: readonly Float32Array[]): void {
    if (middles.length !== step.hops.length - 1) return // not the whole step: stays expected, unverified
    this.chained.push({ step, middles })
  }

  /** Chained steps into their hops' records, in step order; a route with a step not recorded is a gap. */
  complete(): void {
    this.chained.sort((a, b) => a.step.stepId - b.step.stepId)
    for (const { step, middles } of this.chained.splice(0)) {
      const route = this.routes.get(step.hops[0].sessionId)
      if (route) route.recorded++
      const { hops, stepId, startPosition, receipts } = step
      this.record({ hops, stepId, startPosition, inputs: [step.input, ...middles], outputs: [...middles, step.output], receipts })
    }
    for (const route of this.routes.values()) {
      if (route.recorded >= route.expected) continue
      for (const hop of route.hops) {
        let rec = this.hops.get(hop.sessionId)
        if (!rec) this.hops.set(hop.sessionId, (rec = new HopRecord(hop.target, hop.sessionId, this.dim)))
        rec.gap = true
      }
    }
  }
}

/** What the replay needs of the canary monitor. */
export interface OwnStepDeps extends Pick<ProbeDeps, 'benign' | 'classOf' | 'score' | 'noteConviction' | 'log'> {
  readonly replay?: SpanReplay
  readonly dim: number
  readonly benign: DriftModel
  /** The first canary set is not whole yet and is built in the background: replay real sessions. */
  wanted(): boolean
}

/**
 * The client's record of which peers' real steps it replayed (issue 31): a peer is verified while
 * every real step it took was replayed and looked benign; one step not replayed (a chained step
 * whose audit never came back, steps after the set was built, KV a new hop got from elsewhere) or
 * not benign ends that for good.
 */
export class OwnStepChecks {
  private readonly ok = new Set<string>()
  private readonly not = new Set<string>()

  constructor(private readonly d: OwnStepDeps) {}

  /** A new real session's record, when its steps are to be replayed (no canary yet); else undefined. */
  begin(): OwnStepSession | undefined {
    return this.d.replay && this.d.wanted() ? new OwnStepSession(this.d.dim) : undefined
  }

  /** Every real step of `peerId` so far was replayed, and each looked benign. */
  verified(peerId: string): boolean {
    return this.ok.has(peerId) && !this.not.has(peerId)
  }

  /** Real steps of these peers went unreplayed. */
  unverify(peers: readonly string[]): void {
    for (const p of peers) this.not.add(p)
  }

  /**
   * At a session's end: each hop's span run on what it was fed, in slices, and every recorded
   * step scored by the detector (a conviction is noted as a canary's is). Returns the verdicts.
   */
  async check(session: OwnStepSession): Promise<PeerVerdict[]> {
    const { dim, replay } = this.d
    const verdicts: PeerVerdict[] = []
    const t0 = performance.now()
    const seen: Record<string, { steps: number; benign: boolean }> = {}
    session.complete()
    for (const rec of session.hops.values()) {
      const peer = rec.target.peerId
      if (rec.gap || rec.length === 0 || !replay) {
        this.not.add(peer)
        continue
      }
      const run = replay.open(rec.target, rec.length)
      const reference = new Float32Array(rec.length * dim)
      try {
        for (let p = 0; p < rec.length; p += REPLAY_SLICE_ROWS) {
          const n = Math.min(REPLAY_SLICE_ROWS, rec.length - p)
          reference.set(run.run(rec.inputs.subarray(p * dim, (p + n) * dim), p), p * dim)
          await new Promise((resolve) => setImmediate(resolve))
        }
      } finally {
        run.close()
      }
      let benign = true
      for (const s of rec.steps) {
        const [from, to] = [s.position * dim, (s.position + s.rows) * dim]
        const output = rec.outputs.subarray(from, to)
        const expected = reference.subarray(from, to)
        // canary -1: a real step, not a canary (not counted as one sent)
        const scoredAs = { sessionId: rec.sessionId, canary: -1 }
        const inputs = rec.inputs.subarray(0, to)
        const v = this.d.score(rec.target, scoredAs, s.stepId, s.position, s.rows, output, expected, s.receipt, inputs)
        this.d.noteConviction(v)
        verdicts.push(v)
        const ratio = densityRatio(this.d.benign, driftMetrics(output, expected), this.d.classOf(rec.target), to / dim)
        if (ratio > 1 || v.excluded) benign = false
      }
      if (benign) this.ok.add(peer)
      else this.not.add(peer)
      seen[peer] = { steps: (seen[peer]?.steps ?? 0) + rec.steps.length, benign: benign && (seen[peer]?.benign ?? true) }
    }
    if (session.hops.size > 0) this.d.log?.({ event: 'own-steps-checked', peers: seen, ms: performance.now() - t0 })
    return verdicts
  }
}
