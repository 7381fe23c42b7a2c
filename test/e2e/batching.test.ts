/**
 * Issue #18, node batching: concurrent clients through one node (separate processes, libp2p
 * over TCP on 127.0.0.1) have their steps run as batched forwards across sessions, and each gets
 * exactly the tokens it gets alone; a node whose step queue is full answers BUSY and the client
 * moves to a replica.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels, errorCode } from '../../shards/index.js'
import { honestTokens } from '../helpers/honest-tokens.js'
import { GGUF_PATH } from '../helpers/reference.js'

const PROMPTS = ['Once upon a time', 'The little dog', 'Lily and Ben went', 'One day, a cat', 'Tom had a red ball', 'Sue saw']
const MAX_TOKENS = 20
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

interface Outcome {
  readonly ok: boolean
  readonly tokens?: number[]
  readonly code?: string
  readonly message?: string
  readonly busy: boolean
}

async function generate(bootstrap: string[], prompt: string): Promise<Outcome> {
  const events: Array<Record<string, unknown>> = []
  const client = await createClient({
    bootstrap,
    model: GGUF_PATH,
    kernels: createReferenceKernels(),
    canaries: false,
    banMs: 60_000,
    maxFailovers: 8,
    routeTimeoutMs: 20_000,
    log: (e) => events.push(e)
  })
  try {
    await client.view.waitForRoute(1, 4, 30_000)
    const r = await client.generate(prompt, { maxTokens: MAX_TOKENS, temperature: 0, signal: AbortSignal.timeout(240_000) })
    return { ok: true, tokens: r.tokens, busy: events.some((e) => e.event === 'failover' && e.code === 'BUSY') }
  } catch (err) {
    return { ok: false, code: errorCode(err), message: (err as Error).message, busy: false }
  } finally {
    await client.close()
  }
}

async function metric(node: LocalNode, name: string): Promise<string[]> {
  const line = node.logs.find((l) => l.includes('"msg":"metrics"'))
  if (!line) throw new Error('the node logged no metrics address')
  const { url } = JSON.parse(line) as { url: string }
  return (await (await fetch(url)).text()).split('\n').filter((l) => l.startsWith(name))
}

describe('steps of concurrent sessions batched on one node', () => {
  let node: LocalNode
  let expected: number[][]

  beforeAll(async () => {
    // a short gather window makes the batches' make-up vary from step to step (and run to run)
    node = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--metrics', '127.0.0.1:0', '--batch-wait-ms', '2']
    })
    expected = await Promise.all(PROMPTS.map((p) => honestTokens(p, MAX_TOKENS)))
  }, 60_000)

  afterAll(async () => {
    await node?.stop()
  })

  it('each client gets exactly the tokens it gets alone, and steps did run batched', async () => {
    const outcomes = await Promise.all(PROMPTS.map((p) => generate([node.addrs[0]], p)))
    outcomes.forEach((o, i) => {
      expect(o.ok, o.message).toBe(true)
      expect(o.tokens).toEqual(expected[i])
    })
    // batches of more than one session ran: fewer batches of exactly one than batches in all
    const lines = await metric(node, 'layerswarm_batch_sessions_')
    const value = (re: RegExp): number =>
      Number(
        lines
          .find((l) => re.test(l))
          ?.split(' ')
          .at(-1)
      )
    const batches = value(/^layerswarm_batch_sessions_count/)
    const alone = value(/^layerswarm_batch_sessions_bucket\{.*le="1"/)
    console.log(JSON.stringify({ batches, alone }))
    expect(batches - alone).toBeGreaterThan(0)
    expect(node.process.exitCode).toBeNull()
  }, 300_000)
})

describe('a full step queue answers BUSY and clients move to a replica', () => {
  let capped: LocalNode
  let spare: LocalNode
  let expected: number[][]

  beforeAll(async () => {
    // one step may wait on the capped node, and each waits 30 ms for company: concurrent
    // clients overflow it
    capped = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: [...FAST, '--max-queued-steps', '1', '--batch-wait-ms', '30']
    })
    spare = await startLocalNode({ model: GGUF_PATH, layers: '1:4', bootstrap: [capped.addrs[0]], args: FAST })
    expected = await Promise.all(PROMPTS.map((p) => honestTokens(p, MAX_TOKENS)))
  }, 60_000)

  afterAll(async () => {
    await Promise.all([capped?.stop(), spare?.stop()])
  })

  it('every client gets its own tokens; some met BUSY and failed over', async () => {
    // Whether two clients' steps meet on the capped node depends on the routes they pick and on
    // the host's load, so up to three rounds of concurrent clients; every round must be right.
    let metBusy = false
    for (let round = 0; round < 3 && !metBusy; round++) {
      const outcomes = await Promise.all(PROMPTS.map((p) => generate([capped.addrs[0], spare.addrs[0]], p)))
      outcomes.forEach((o, i) => {
        expect(o.ok, `${o.code}: ${o.message}`).toBe(true)
        expect(o.tokens).toEqual(expected[i])
      })
      metBusy = outcomes.some((o) => o.busy)
    }
    expect(metBusy).toBe(true)
    expect(capped.process.exitCode).toBeNull()
    expect(spare.process.exitCode).toBeNull()
  }, 600_000)

  it('with no replica, a BUSY node gives a clear typed error rather than a hang', async () => {
    await spare.stop()
    const outcomes = await Promise.all(PROMPTS.map((p) => generate([capped.addrs[0]], p)))
    for (const [i, o] of outcomes.entries()) {
      if (o.ok) expect(o.tokens).toEqual(expected[i])
      else expect(o.code, o.message).toMatch(/BUSY|NO_ROUTE/)
    }
    expect(outcomes.some((o) => !o.ok)).toBe(true)
    expect(capped.process.exitCode).toBeNull()
  }, 300_000)
})
