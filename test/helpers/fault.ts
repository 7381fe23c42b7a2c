import { type ClientInit, createClient, type GenerateResult, type LayerswarmClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from './reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')

export interface FaultPlan {
  /** Inject the fault after this many generated tokens. */
  readonly at: number
  /** Which hop of the current route to hit (default the first). */
  readonly hop?: number
  /** Do something to that hop's node process (kill, freeze, SIGTERM). */
  readonly fault: (node: LocalNode) => void | Promise<void>
}

/**
 * Greedy generation of the reference prompt (64 tokens) that hits one node of the route in use
 * mid-way; returns the tokens, the final result, the node hit and the route it was on.
 */
export async function generateWithFault(
  client: LayerswarmClient,
  events: ReadonlyArray<Record<string, unknown>>,
  nodes: readonly LocalNode[],
  plan: FaultPlan
): Promise<{ tokens: number[]; result: GenerateResult; victim: LocalNode; route: Array<{ peerId: string }> }> {
  const it = client.stream(ref.prompt, { maxTokens: 64, temperature: 0 })
  const tokens: number[] = []
  let victim: LocalNode | undefined
  let route: Array<{ peerId: string }> = []
  let r = await it.next()
  while (!r.done) {
    if (r.value.type === 'rollback') tokens.splice(r.value.position, tokens.length, ...r.value.tokens)
    else tokens.push(r.value.token)
    if (tokens.length === plan.at) {
      route = events.filter((e) => e.event === 'route').at(-1)?.route as Array<{ peerId: string }>
      victim = nodes.find((n) => n.peerId === route[plan.hop ?? 0].peerId)!
      await plan.fault(victim)
    }
    r = await it.next()
  }
  if (!victim) throw new Error(`generation ended before token ${plan.at}`)
  return { tokens, result: r.value, victim, route }
}

/** Node flags for failover tests: the exact reference kernels, frequent announcements. */
export const FAULT_NODE_ARGS = ['--kernels', 'reference', '--announce-interval', '300']

/** One stories260K node per span (`'1:4'`, or `{ layers, args }` for extra flags), all joined through the first. */
export async function startSpans(spans: ReadonlyArray<string | { layers: string; args: string[] }>): Promise<LocalNode[]> {
  const spec = (s: (typeof spans)[number]) =>
    typeof s === 'string' ? { layers: s, args: FAULT_NODE_ARGS } : { layers: s.layers, args: [...FAULT_NODE_ARGS, ...s.args] }
  const first = await startLocalNode({ model: GGUF_PATH, ...spec(spans[0]) })
  const bootstrap = [first.addrs[0]]
  const rest = await Promise.all(spans.slice(1).map((s) => startLocalNode({ model: GGUF_PATH, bootstrap, ...spec(s) })))
  return [first, ...rest]
}

/** A client on the exact kernels that logs into `events` and fails over within seconds. */
export async function createFaultClient(
  nodes: readonly LocalNode[],
  events: Array<Record<string, unknown>>,
  init: Partial<ClientInit> = {}
): Promise<LayerswarmClient> {
  return await createClient({
    bootstrap: nodes.map((n) => n.addrs[0]),
    model: GGUF_PATH,
    kernels: createReferenceKernels(),
    stepTimeoutMs: 5_000,
    routeTimeoutMs: 20_000,
    log: (e) => events.push(e),
    ...init
  })
}
