/**
 * Issue 6 §5: wire dtypes negotiated per hop, on three real node processes (stories260K):
 * A serves [0, 3) with every dtype, B serves [3, 5) started with `--wire f32`, C serves [3, 5)
 * with every dtype. The client runs blocks 0 and 4 itself, so routes are A[1,3) → B|C[3,4).
 */
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type GenerateResult, type WirePreference } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createSessionCaller,
  encodeTensor,
  fetchInfo,
  type Host,
  RemoteError,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionRequestBody
} from '../../protocol/index.js'
import { createReferenceKernels } from '../../shards/index.js'
import { runCli } from '../helpers/cli.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const N_TOKENS = 64
const DIM = 64
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

/** ‖a − b‖₂ / ‖b‖₂ per step, and the largest. */
function maxRelL2(a: Float32Array[], b: Float32Array[]): number {
  let worst = 0
  for (let s = 0; s < Math.min(a.length, b.length); s++) {
    let d2 = 0
    let r2 = 0
    for (let i = 0; i < b[s].length; i++) {
      d2 += (a[s][i] - b[s][i]) ** 2
      r2 += b[s][i] ** 2
    }
    worst = Math.max(worst, Math.sqrt(d2 / r2))
  }
  return worst
}

describe('wire dtypes negotiated per hop across 3 node processes', () => {
  const nodes: LocalNode[] = []
  let a: LocalNode
  let b: LocalNode
  let c: LocalNode
  let bootstrap: string[]

  beforeAll(async () => {
    a = await startLocalNode({ model: GGUF_PATH, layers: '0:3', args: FAST })
    bootstrap = [a.addrs[0]]
    ;[b, c] = await Promise.all([
      startLocalNode({ model: GGUF_PATH, layers: '3:5', bootstrap, args: [...FAST, '--wire', 'f32'] }),
      startLocalNode({ model: GGUF_PATH, layers: '3:5', bootstrap, args: FAST })
    ])
    nodes.push(a, b, c)
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  async function run(
    wire: WirePreference,
    o: { forwarding?: 'relay' | 'chain'; ban?: string[]; routeTimeoutMs?: number } = {}
  ): Promise<{ result: GenerateResult; logits: Float32Array[] }> {
    const client = await createClient({
      bootstrap,
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      wireDtype: wire,
      forwarding: o.forwarding ?? 'relay',
      routeTimeoutMs: o.routeTimeoutMs ?? 20_000,
      canaries: false
    })
    try {
      for (const id of o.ban ?? []) client.view.ban(id, 600_000)
      const logits: Float32Array[] = []
      const result = await client.generate(ref.prompt, {
        maxTokens: N_TOKENS,
        temperature: 0,
        onLogits: (l) => logits.push(Float32Array.from(l))
      })
      return { result, logits }
    } finally {
      await client.close()
    }
  }

  it('nodes announce what they accept: B only f32', async () => {
    const host = await createHost({ listen: [], pubsub: false })
    try {
      const infoOf = async (n: LocalNode) =>
        (
          await fetchInfo(
            host,
            n.addrs.map((x) => multiaddr(x)),
            { signal: AbortSignal.timeout(10_000) }
          )
        ).info.wireDtypes
      expect(await infoOf(a)).toEqual(['f32', 'f16', 'q8_0'])
      expect(await infoOf(b)).toEqual(['f32'])
    } finally {
      await host.stop()
    }
  })

  it('f16 keeps the greedy tokens with about half the bytes per token of f32; q8_0 runs and reports its drift', async () => {
    const f32 = await run('f32')
    const f16 = await run('f16')
    const int8 = await run('q8_0')
    expect(f32.result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
    expect(f16.result.tokens).toEqual(f32.result.tokens)
    expect(int8.result.tokens).toHaveLength(N_TOKENS)
    // every hop used the dtype asked for (f16 and q8_0 routed around B, which accepts only f32)
    expect(f32.result.report.wire.hops.map((h) => h.wireDtype)).toEqual(['f32', 'f32'])
    expect(f16.result.report.wire.hops.map((h) => [h.peerId, h.wireDtype])).toEqual([
      [a.peerId, 'f16'],
      [c.peerId, 'f16']
    ])
    expect(int8.result.report.wire.hops.map((h) => [h.peerId, h.wireDtype])).toEqual([
      [a.peerId, 'q8_0'],
      [c.peerId, 'q8_0']
    ])
    // bytes: 2 hops × (in + out) × one row of 64 values per position
    const positions = ref.prompt_tokens.length + N_TOKENS - 1
    expect(f32.result.report.wire.positions).toBe(positions)
    expect(f32.result.report.wire.bytesPerToken).toBe(4 * DIM * 4)
    const ratio16 = f16.result.report.wire.activationBytes / f32.result.report.wire.activationBytes
    const ratio8 = int8.result.report.wire.activationBytes / f32.result.report.wire.activationBytes
    expect(ratio16).toBeLessThanOrEqual(0.55)
    expect(ratio8).toBeLessThan(ratio16)
    // drift of the final logits against the f32 wire: none for f32 runs, some for f16, more for q8_0
    const drift16 = maxRelL2(f16.logits, f32.logits)
    const drift8 = maxRelL2(int8.logits, f32.logits)
    console.log(
      JSON.stringify({
        wire: {
          ratio16,
          ratio8,
          maxRelL2: { f16: drift16, q8_0: drift8 },
          q8_0SameTokens: int8.result.tokens.every((t, i) => t === f32.result.tokens[i])
        }
      })
    )
    expect(drift16).toBeGreaterThan(0)
    expect(drift8).toBeGreaterThan(drift16)
    expect(Number.isFinite(drift8)).toBe(true)
  })

  it('auto gives f16 where a hop accepts it and f32 on the node started with --wire f32', async () => {
    const relay = await run('auto', { ban: [c.peerId] })
    expect(relay.result.report.wire.requested).toBe('auto')
    expect(relay.result.report.wire.hops.map((h) => [h.peerId, h.wireDtype])).toEqual([
      [a.peerId, 'f16'],
      [b.peerId, 'f32']
    ])
    expect(relay.result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
    // chained, the link A → B carries one dtype both accept
    const chain = await run('auto', { ban: [c.peerId], forwarding: 'chain' })
    expect(chain.result.report.wire.hops.map((h) => [h.peerId, h.wireDtype])).toEqual([
      [a.peerId, 'f32'],
      [b.peerId, 'f32']
    ])
    expect(chain.result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
  })

  it('an explicit dtype no route accepts fails with a typed error', async () => {
    const err = await run('f16', { ban: [c.peerId], routeTimeoutMs: 1_000 }).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'WIRE_UNSUPPORTED', name: 'UnsupportedWireError' })
    expect((err as Error).message).toMatch(new RegExp(`${b.peerId} \\[3, 5\\) accepts f32`))
  })

  it('a node refuses an unsupported dtype at open and a step in another dtype than negotiated, and keeps serving', async () => {
    const host: Host = await createHost({ listen: [], pubsub: false })
    const dial = async (n: LocalNode) =>
      createSessionCaller(
        await host.dialProtocol(
          n.addrs.map((x) => multiaddr(x)),
          SESSION_PROTOCOL,
          SESSION_STREAM_LIMITS
        )
      )
    const open = (sessionId: string, start: number, end: number, wireDtype: 'f32' | 'f16' | 'q8_0'): SessionRequestBody => ({
      type: 'open',
      open: { sessionId, modelId: a.modelId, start, end, maxLength: 8, wireDtype, nextHops: [] }
    })
    const row = Float32Array.from({ length: DIM }, (_, i) => Math.sin(i))
    const step = (sessionId: string, stepId: number, dtype: 'f32' | 'f16' | 'q8_0'): SessionRequestBody => ({
      type: 'step',
      step: { sessionId, stepId, startPosition: 0, hidden: encodeTensor(row, [1, DIM], dtype), chain: false }
    })
    const refused = async (p: Promise<unknown>) => {
      const e = await p.then(
        () => undefined,
        (x: unknown) => x
      )
      expect(e).toBeInstanceOf(RemoteError)
      return (e as RemoteError).code
    }
    try {
      const toB = await dial(b)
      expect(await refused(toB.call(open('w-b16', 3, 4, 'f16')))).toBe('UNSUPPORTED_DTYPE')
      expect(await refused(toB.call(open('w-b8', 3, 4, 'q8_0')))).toBe('UNSUPPORTED_DTYPE')
      // same stream: an f32 session opens and steps
      expect(await toB.call(open('w-b32', 3, 4, 'f32'))).toMatchObject({ type: 'opened' })
      expect(await toB.call(step('w-b32', 1, 'f32'))).toMatchObject({ type: 'result', result: { hidden: { dtype: 'f32' } } })
      const toA = await dial(a)
      expect(await toA.call(open('w-a16', 1, 3, 'f16'))).toMatchObject({ type: 'opened' })
      expect(await refused(toA.call(step('w-a16', 1, 'f32')))).toBe('WRONG_DTYPE')
      expect(await refused(toA.call(step('w-a16', 1, 'q8_0')))).toBe('WRONG_DTYPE')
      // the refused steps left the session as it was: the f16 step runs at position 0
      expect(await toA.call(step('w-a16', 1, 'f16'))).toMatchObject({ type: 'result', result: { hidden: { dtype: 'f16' } } })
      toA.abort(new Error('done'))
      toB.abort(new Error('done'))
    } finally {
      await host.stop()
    }
    // and both nodes still serve whole generations
    const after = await run('auto', { ban: [c.peerId] })
    expect(after.result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
  })

  it('CLI: generate --wire int8 (the deprecated name of q8_0) --json reports the dtype of each hop and the bytes per token; node start refuses a bad --wire', () => {
    const r = runCli(
      [
        'generate',
        '--bootstrap',
        a.addrs[0],
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '8',
        '--temperature',
        '0',
        '--wire',
        'int8',
        '--json',
        '--canary-rate',
        '0'
      ],
      120_000
    )
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout) as GenerateResult
    expect(out.report.wire.requested).toBe('q8_0')
    expect(out.report.wire.hops.map((h) => h.wireDtype)).toEqual(['q8_0', 'q8_0'])
    expect(out.report.wire.bytesPerToken).toBe(4 * 68) // 2 hops × in + out × one Q8_0 row of 2 blocks
    const bad = runCli(['node', 'start', '--wire', 'f32,bf16'])
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toMatch(/--wire f32,bf16: bf16 is not one of f32, f16, q8_0/)
  })
})
