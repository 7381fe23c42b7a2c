import type { AbortOptions } from '@libp2p/interface'
import type { Receipt } from '../../protocol/index.js'
import type { HopSession, HopTarget } from './hop.js'

/** What an observer may read of a RemotePipeline after a step: its live route and the inputs it sent. */
export interface PipelineState {
  readonly route: readonly HopTarget[]
  /** The live route's hop sessions (each knows its session id). */
  readonly hops: readonly HopSession[]
  /** Every input row sent so far, [length, dim] f32 (the route's KV is a function of it). */
  readonly history: Float32Array
  readonly length: number
  /** The session id the next route's hops will be opened under (standbys open under it ahead). */
  readonly nextSessionId: string
}

/** A real step the pipeline just completed. */
export interface CompletedStep {
  readonly startPosition: number
  readonly rows: number
  /** A speculative step's draft length (K asked for); undefined for a plain step. */
  readonly draftLength?: number
}

/** One relayed step as the client saw it, hop by hop (PipelineObserver.relayedStepChecked). */
export interface RelayedStep {
  readonly hops: readonly HopSession[]
  readonly stepId: number
  readonly startPosition: number
  /** Per hop: the rows it was fed [rows, dim] (the previous hop's decoded output after the first). */
  readonly inputs: readonly Float32Array[]
  /** Per hop: the rows it answered [rows, dim]. */
  readonly outputs: readonly Float32Array[]
  /** Per hop: its signed receipt of the step. */
  readonly receipts: readonly (Receipt | undefined)[]
}

/**
 * One chained step as the client saw it (PipelineObserver.chainedStepChecked): what it sent the
 * first hop and what the last hop answered; the middle hops' outputs come from their audits.
 */
export interface ChainedStep {
  readonly hops: readonly HopSession[]
  readonly stepId: number
  readonly startPosition: number
  readonly rows: number
  /** The rows the client sent the first hop [rows, dim]. */
  readonly input: Float32Array
  /** The rows the last hop answered [rows, dim]. */
  readonly output: Float32Array
  /** Every hop's signed receipt of the step, in route order. */
  readonly receipts: readonly Receipt[]
}

/** A peer an observer convicted: the pipeline bans it, leaves the route and reports why. */
export interface Exclusion {
  readonly peerId: string
  readonly why: string
  readonly posterior?: number
}

/**
 * How canaries, snapshots and standbys follow a RemotePipeline without driving it: they are told
 * of steps, chained steps' receipts, a planned leave and the session's end, and may only answer
 * with peers to exclude. Routing, failover and replay stay in RemotePipeline. Every hook is
 * optional; the pipeline awaits them in the order the observers were given.
 */
export interface PipelineObserver {
  /** A real step is about to go out (decoy steps go out beside it: client/verification/canary-schedule.ts). */
  beforeStep?(): Promise<void>
  /** After a real step's output was accepted and remembered; peers to exclude, if any. */
  stepDone?(state: PipelineState, step: CompletedStep, options?: AbortOptions): Promise<readonly Exclusion[] | undefined>
  /**
   * A chained step's receipts passed (off the critical path, after stepDone); a BadReceiptError
   * poisons the route. Canaries audit its middle hops, and a new client records it to replay
   * (issue 31, client/verification/own-step-replay.ts).
   */
  chainedStepChecked?(step: ChainedStep): Promise<void>
  /**
   * A relayed step's hops all answered and their receipts passed: what each hop was fed and what
   * it answered, in route order (issue 31: a new client checks its first generation by replaying
   * these on its own kernels, client/verification/own-step-replay.ts). Synchronous, before stepDone.
   */
  relayedStepChecked?(step: RelayedStep): void
  /** A hop answered LEAVING: the route is about to be left on purpose (its KV may still be exported). */
  leaving?(state: PipelineState, options?: AbortOptions): Promise<void>
  /**
   * The session is closing: wait for `offPath` (the transport's deferred checks) as needed and
   * return the peers convicted meanwhile. Runs before the hops are closed.
   */
  settle?(offPath: () => Promise<unknown>): Promise<readonly Exclusion[]>
  /** After settle: free what the observer holds (runs beside the hops' close). */
  close?(): Promise<void>
}
