import type { CanaryTraces } from '../../../canary/index.js'
import type { Edge, Kernels, Tokenizer } from '../../../shards/index.js'
import type { SecretSetStore } from './canary-set-store.js'
import type { PromptsFromContext } from './canary-template.js'

/*
 * What a client's canary trace store (client/verification/canaries/canary-trace-store.ts) is given: where its prompts
 * come from, how long its canaries are, and how and when it builds them.
 */

/**
 * A growth projected to take longer than this runs in slices between the client's real steps
 * (CanaryTraceStore `inSlices`): a new client's secret set grows twice in its start-up burst, and
 * on a 110m model each growth held a real generation for tens of seconds when built at once.
 */
export const BACKGROUND_BUILD_MS = 1000

export interface CanaryTraceStoreOptions {
  readonly kernels?: Kernels
  readonly prompts?: readonly string[]
  /**
   * Made on first use when `prompts` is not given (secret canaries: client/verification/canaries/canary-secret.ts):
   * prompts `from` to `count` of the secret set (prompt i is fixed by the secret and i, and
   * by the openings observed when it is made), so the set grows by new ones.
   */
  readonly promptsFrom?: (count: number, more: PromptsFromContext) => readonly string[]
  /** Canaries the secret set starts with (default 8); doubled when a peer has seen them all. */
  readonly count?: number
  readonly seed?: number
  /**
   * A canary bank (canary/canary-bank.ts): traces built elsewhere, so the client never runs
   * the blocks it does not hold (a thin client). Its canaries' length sets `length`.
   */
  readonly bank?: CanaryTraces
  /** Positions per canary (default max(256, maxLength), capped by the context). */
  readonly length?: number
  readonly maxLength: number
  /**
   * Growing a built set by more canaries, when projected to take over BACKGROUND_BUILD_MS, runs
   * in slices with the event loop going on (the set built so far serves meanwhile); the first
   * build and longer canaries (a longer session starting) are at once. Off by default (tests
   * that plan decoys back to back).
   */
  readonly inSlices?: boolean
  /** The projected time over which a build goes in slices (default BACKGROUND_BUILD_MS; 0: every growth). */
  readonly inSlicesOverMs?: number
  readonly onBuild?: (boundary: number, built: number, total: number) => void
  /** A build in slices failed (the set built so far goes on serving). */
  readonly onBuildError?: (err: Error) => void
  /** The client's tokenizer and edge (embeddings, head on `kernels`), shared by every build. */
  readonly tokenizer?: Tokenizer
  readonly edge?: Edge
  /** promptsFrom as a sliced job: a build in the background makes its prompts with it. */
  readonly promptsJob?: (count: number, more: PromptsFromContext) => Generator<void, readonly string[]>
  /**
   * With inSlices, a first build of more multiply-adds than this (default FIRST_BUILD_AT_ONCE_MACS)
   * runs in the background, and so does every growth after it: the first token does not wait
   * for it, and decoys start once it is done (issue 31). 0: always in the background.
   */
  readonly firstAtOnceMacs?: number
  /** Share of the event loop a background build takes (default DEFAULT_BACKGROUND_SHARE: canary/background-job.ts). */
  readonly backgroundShare?: number
  /** Where the built set is kept between runs (client/verification/canaries/canary-set-store.ts): loaded first, saved after each build. */
  readonly saved?: SecretSetStore
}
