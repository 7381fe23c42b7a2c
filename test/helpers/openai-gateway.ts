/**
 * The set-up of the OpenAI gateway e2e test: a 2-process swarm of stories260K (blocks 0:3 and
 * 2:5, reference kernels), an open gateway with --metrics and one locked by an API key, both
 * keeping edges 1+1 with canaries at 0.2, and the openai client on the open one.
 */
import OpenAI from 'openai'
import type { ApiOptions, RunningApi } from '../../node/cli/commands/api.js'
import { runApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createLogger } from '../../node/log.js'
import { createTokenizer, openModelFile } from '../../shards/index.js'
import { gatewayOptions } from './gateway-api.js'
import { GGUF_PATH, type Reference } from './reference.js'

const FAST = ['--kernels', 'reference', '--announce-interval', '300']

export interface OpenAiGatewaySwarm {
  readonly nodes: LocalNode[]
  readonly open: RunningApi
  readonly locked: RunningApi
  /** maxRetries 0: a 429 or 5xx must surface in the test, not be retried away. */
  readonly client: OpenAI
  /** The reference's first 24 greedy tokens as text. */
  readonly greedyText: string
  close(): Promise<void>
}

/** The options both gateways start with; `extra` overrides any. */
export function openAiGatewayOptions(extra: Partial<ApiOptions> & { bootstrap: string }): ApiOptions {
  return gatewayOptions({ maxConcurrent: 4, canaryRate: 0.2, model: GGUF_PATH, ...extra })
}

export async function startOpenAiGatewaySwarm(ref: Reference, apiKey: string): Promise<OpenAiGatewaySwarm> {
  const nodes: LocalNode[] = []
  const apis: RunningApi[] = []
  const close = async (): Promise<void> => {
    for (const a of apis) await a.close()
    await Promise.all(nodes.map((n) => n.stop()))
  }
  try {
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '0:3', args: FAST }))
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '2:5', bootstrap: [nodes[0].addrs[0]], args: FAST }))
    const bootstrap = nodes[0].addrs[0]
    // GW_LOG=debug shows the gateways' logs when a test fails.
    const log = createLogger({ level: (process.env.GW_LOG as 'silent') ?? 'silent' })
    const open = await runApi(openAiGatewayOptions({ bootstrap, metrics: '127.0.0.1:0' }), log)
    apis.push(open)
    const locked = await runApi(openAiGatewayOptions({ bootstrap, apiKey }), log)
    apis.push(locked)
    const client = new OpenAI({ baseURL: `${open.gateway.url}/v1`, apiKey: 'unused', maxRetries: 0 })
    const m = openModelFile(GGUF_PATH)
    const greedyText = createTokenizer(m.vocabulary!).decode(ref.generated_tokens.slice(0, 24))
    m.close()
    return { nodes, open, locked, client, greedyText, close }
  } catch (err) {
    await close()
    throw err
  }
}

/** What `p` rejects with, or undefined if it resolves (the test then asserts on it). */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  return await p.then(
    () => undefined,
    (e: unknown) => e
  )
}
