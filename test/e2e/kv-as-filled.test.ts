/**
 * Issue #39 ("KV is reserved only as it is filled"), against a real node process: sessions that
 * ask for the whole context and never fill it hold KV_INITIAL_POSITIONS each, not their maxLength,
 * so the free KV the node reports (and announces, which routes read) stays what is really free;
 * a session's KV grows as its steps fill it, and its outputs stay exact across the growths.
 * Before: three sessions asking 512 positions took 1,536 of the node's 2,048 at open.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createSessionCaller,
  decodeTensor,
  encodeTensor,
  fetchInfo,
  type Host,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller
} from '../../protocol/index.js'
import { createEdge, createShard, KV_INITIAL_POSITIONS, openModelFile, selectKernels } from '../../shards/index.js'
import { openBody, stepBody } from '../helpers/hostile-cases.js'
import { GGUF_PATH } from '../helpers/reference.js'

const [START, END] = [1, 4]
const MAX_SESSIONS = 4
const SEQ_LEN = 512

describe('KV held as it is filled (issue #39)', () => {
  let node: LocalNode
  let squatter: Host
  let honest: Host
  const model = openModelFile(GGUF_PATH)
  const kernels = selectKernels({ kind: 'reference' })
  const local = createShard({ model, start: START, end: END, kernels })
  const dim = model.config.dim
  const target = () => node.addrs.map((a) => multiaddr(a))
  const free = async () => (await fetchInfo(honest, target())).info.freeCacheTokens
  const caller = async (h: Host): Promise<SessionCaller> =>
    createSessionCaller(await h.dialProtocol(target(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS))

  beforeAll(async () => {
    node = await startLocalNode({
      model: GGUF_PATH,
      layers: `${START}:${END}`,
      args: ['--kernels', 'reference', '--max-sessions', String(MAX_SESSIONS)]
    })
    squatter = await createHost({ listen: [], pubsub: false })
    honest = await createHost({ listen: [], pubsub: false })
  }, 60_000)

  afterAll(async () => {
    await Promise.all([squatter?.stop(), honest?.stop()])
    await node?.stop()
    kernels.close?.()
    model.close()
  })

  it('sessions that ask for the whole context hold only what they fill; steps grow it, exactly', async () => {
    const whole = MAX_SESSIONS * SEQ_LEN
    expect(await free()).toBe(whole)
    const sq = await caller(squatter)
    for (let i = 0; i < 3; i++) {
      const got = await sq.call(openBody(`squat-${i}`, { modelId: node.modelId, start: START, end: END, maxLength: SEQ_LEN }))
      expect(got.type).toBe('opened')
    }
    // before: 2048 - 3 × 512 = 512 free
    expect(await free()).toBe(whole - 3 * KV_INITIAL_POSITIONS)

    const c = await caller(honest)
    expect((await c.call(openBody('mine', { modelId: node.modelId, start: START, end: END, maxLength: SEQ_LEN }))).type).toBe(
      'opened'
    )
    local.openSession('mine', { maxLength: SEQ_LEN })
    const ids = Array.from({ length: 140 }, (_, i) => (i * 37 + 11) % model.config.vocabSize)
    const rows = createEdge({ model, kernels }).embed(ids)
    const step = async (stepId: number, from: number, to: number) => {
      const input = rows.subarray(from * dim, to * dim)
      const res = await c.call(stepBody('mine', stepId, from, encodeTensor(input, [to - from, dim], 'f32')))
      if (res.type !== 'result' || !res.result.hidden) throw new Error(`no output: ${JSON.stringify(res)}`)
      const want = local.forward('mine', input, from)
      const got = decodeTensor(res.result.hidden)
      expect(
        Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(Buffer.from(want.buffer, want.byteOffset, want.byteLength))
      ).toBe(true)
    }
    // a prefill past the first positions grows the session's KV (64 → 128), then decode steps
    // past 128 grow it again (→ 256); every output is the in-process span's, bit for bit
    await step(1, 0, 70)
    expect(await free()).toBe(whole - 3 * KV_INITIAL_POSITIONS - 128)
    for (let p = 70; p < 128; p++) await step(p, p, p + 1)
    expect(await free()).toBe(whole - 3 * KV_INITIAL_POSITIONS - 128)
    for (let p = 128; p < 140; p++) await step(p, p, p + 1)
    expect(await free()).toBe(whole - 3 * KV_INITIAL_POSITIONS - 256)
  }, 120_000)
})
