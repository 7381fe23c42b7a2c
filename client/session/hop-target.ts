import type { DType, KvWireDType } from '../../protocol/index.js'
import type { RouteHop } from '../routing/route.js'

/**
 * One hop of a route as a session dials it: the route's hop plus what the peer announced. Its own
 * file so hop.ts and hop-keys.ts both take it without importing each other (no cycle, issue 36).
 */
export interface HopTarget extends RouteHop {
  readonly addrs: readonly string[]
  /** The wire dtypes the peer accepts (its info / announcement). */
  readonly wireDtypes?: readonly DType[]
  /** The dtype negotiated for this hop of the route (client/session/wire-negotiation.ts). */
  readonly wireDtype?: DType
  /** The peer's KV cache dtype as it announces it (selects its benign canary drift class). */
  readonly kvDtype?: KvWireDType
  /** What runs its span as it announces it (issue 32): a ggml backend is scored in the /qw class. */
  readonly backend?: string
}
