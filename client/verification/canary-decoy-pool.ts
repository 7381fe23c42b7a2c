import type { HopTarget } from '../session/hop.js'
import { randomSessionId } from '../session/session-id.js'
import { type DecoyDraftRows, nextSpeculativeStep, type PlannedDecoyStep, speculativeDecoy } from './canary-decoy-speculative.js'
import { type CanaryMaterial, type Decoy, decoyDone } from './canary-decoys.js'
import type { StepContext } from './canary-types.js'

/** The open decoys, one per hop (relayed) or per route (chained), each following its plan. */
export class DecoyPool {
  private readonly decoys = new Map<string, Decoy>()
  /** Retired decoys' closes still under way (after their last scoring). */
  private readonly closing = new Set<Promise<void>>()

  constructor(
    private readonly material: CanaryMaterial,
    /** Rejected drafts' rows of speculative decoys. */
    readonly draftRows?: DecoyDraftRows
  ) {}

  /** The decoy for `key`, opened anew when it has none or its plan is done. */
  async decoyFor(
    key: string,
    targets: readonly HopTarget[],
    ctx: StepContext,
    open: (sessionId: string, maxLength: number) => Promise<Pick<Decoy, 'hop' | 'chain'>>
  ): Promise<Decoy> {
    let decoy = this.decoys.get(key)
    if (decoy && !decoyDone(decoy)) return decoy
    if (decoy) {
      this.decoys.delete(key)
      await this.close(decoy)
    }
    const plan = this.material.plan(
      targets[0].start,
      ctx,
      targets.map((t) => t.peerId)
    )
    // shaped as a real route's hop session id (128 random bits, as RemotePipeline's)
    const sessionId = randomSessionId()
    const opened = await open(sessionId, plan.maxLength)
    decoy = {
      targets,
      ...opened,
      sessionId,
      canary: plan.canaryIndex,
      steps: plan.steps,
      next: 0,
      stepId: 1,
      taintedFrom: targets.length,
      spec:
        ctx.draftLength === undefined || !this.draftRows
          ? undefined
          : speculativeDecoy(
              this.material.setFor(targets[0].start).canaries[plan.canaryIndex].tokens,
              plan.steps[0].rows,
              plan.steps[plan.steps.length - 1].startPosition + plan.steps[plan.steps.length - 1].rows,
              ctx.draftLength
            )
    }
    this.decoys.set(key, decoy)
    return decoy
  }

  /**
   * One step of the decoy for `key`: a step that fails leaves the decoy's session out of step with
   * the peer (or gone, e.g. closed as idle), so the decoy is dropped and the next probe opens anew.
   */
  async stepDecoy<T>(
    key: string,
    decoy: Decoy,
    run: (step: PlannedDecoyStep, stepId: number) => Promise<T>,
    draftLength?: number
  ): Promise<T> {
    const step: PlannedDecoyStep =
      decoy.spec && decoy.next > 0
        ? nextSpeculativeStep(decoy.spec, draftLength)
        : { ...decoy.steps[decoy.next], scored: decoy.steps[decoy.next].rows, rejected: [] }
    decoy.next++
    try {
      return await run(step, decoy.stepId++)
    } catch (err) {
      if (this.decoys.get(key) === decoy) this.decoys.delete(key)
      this.close(decoy).catch(() => {})
      throw err
    }
  }

  /**
   * A decoy whose plan is done: closed once `after` settles (its last steps' audits and scoring),
   * as a real session closes after its last audits; a later probe opens a new one.
   */
  retire(key: string, decoy: Decoy, after: Promise<unknown>): void {
    if (this.decoys.get(key) === decoy) this.decoys.delete(key)
    // closeAll waits for these too: a client that ends (a CLI run exits right after) must not
    // leave retired decoys' sessions open on a peer until its idle timeout, where they fill its
    // session cap (a peer's burst keeps several decoys in flight)
    const closed = after
      .then(
        () => undefined,
        () => undefined
      )
      .then(() => this.close(decoy))
      .catch(() => {})
    this.closing.add(closed)
    closed.finally(() => this.closing.delete(closed))
  }

  /** The decoy for `key`, if open, ends early (closed once `after` settles), as a real session may. */
  release(key: string, after: Promise<unknown>): boolean {
    const decoy = this.decoys.get(key)
    if (decoy) this.retire(key, decoy, after)
    return decoy !== undefined
  }

  /**
   * Every open decoy through `peerId` ends (closed once its scoring settles): a convicted peer is
   * routed around, so its decoys would get no further step, and their sessions stayed open on it
   * until the client closed, counting against its per-client session cap (BUSY for others).
   */
  releasePeer(peerId: string, scoring: ReadonlyMap<string, Promise<unknown>>): number {
    let n = 0
    for (const [key, d] of [...this.decoys])
      if (d.targets.some((t) => t.peerId === peerId)) {
        this.retire(key, d, scoring.get(key) ?? Promise.resolve())
        n++
      }
    return n
  }

  /** Whether a decoy for `key` is open. */
  has(key: string): boolean {
    return this.decoys.has(key)
  }

  async closeAll(): Promise<void> {
    const all = [...this.decoys.values()]
    this.decoys.clear()
    await Promise.all([...all.map((d) => this.close(d).catch(() => {})), ...this.closing])
  }

  private close(d: Decoy): Promise<void> {
    this.draftRows?.release(d.spec)
    return closeDecoy(d)
  }
}

function closeDecoy(d: Decoy): Promise<void> {
  return d.chain ? d.chain.close() : d.hop!.close()
}
