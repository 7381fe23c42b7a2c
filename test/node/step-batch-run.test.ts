import { describe, expect, it } from 'vitest'
import { SessionManager } from '../../node/daemon/session-manager.js'
import { NodeStepQueue } from '../../node/daemon/step-batch-run.js'
import { UnauthorizedError, UnknownSessionError } from '../../protocol/errors.js'
import { createEdge, createShard, openModelFile, PositionError } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

// The node's batched steps (issue #18) over a real Shard and SessionManager: outputs equal each
// session's step alone, one bad step fails only itself, and the per-session checks of a
// step (retries, upstream step ids, closed sessions) hold inside a batch.

const model = openModelFile(GGUF_PATH)
const edge = createEdge({ model })

function setup() {
  const shard = createShard({ model, start: 1, end: 4 })
  const sessions = new SessionManager({ shard, maxSessions: 8, maxCacheTokens: 4_000, idleTimeoutMs: 60_000 })
  const batches: number[] = []
  const queue = new NodeStepQueue({ shard, sessions, maxQueued: 8, maxBatchRows: 16, onBatch: (jobs) => batches.push(jobs) })
  const twin = createShard({ model, start: 1, end: 4 })
  const open = (id: string) => {
    const s = sessions.open({ sessionId: id, start: 1, end: 4, maxLength: 64, owner: 'c' })
    twin.openSession(s.key, { maxLength: 64 })
    return s
  }
  return { queue, sessions, twin, open, batches }
}

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)

describe('NodeStepQueue', () => {
  it('batches steps of several sessions; each output equals its session alone', async () => {
    const { queue, twin, open, batches } = setup()
    const ss = ['a', 'b', 'c'].map(open)
    const prompts = [
      [1, 5, 9],
      [1, 20],
      [1, 7, 7, 30]
    ]
    const outs = await Promise.all(
      ss.map((s, i) =>
        queue.enqueue({ session: s, stepId: 1, startPosition: 0, hidden: edge.embed(prompts[i]), fromUpstream: false })
      )
    )
    expect(batches).toEqual([3])
    outs.forEach((o, i) => {
      expect(bits(o.output).equals(bits(twin.forward(ss[i].key, edge.embed(prompts[i]), 0)))).toBe(true)
    })
    const next = await Promise.all(
      ss.map((s, i) =>
        queue.enqueue({ session: s, stepId: 2, startPosition: prompts[i].length, hidden: edge.embed([42]), fromUpstream: false })
      )
    )
    next.forEach((o, i) => {
      expect(bits(o.output).equals(bits(twin.forward(ss[i].key, edge.embed([42]), prompts[i].length)))).toBe(true)
    })
    expect(queue.stats).toEqual({ batches: 2, steps: 6, busy: 0 })
  })

  it("a bad step fails alone; the batch's other steps are right; retries and replays are judged per step", async () => {
    const { queue, sessions, twin, open } = setup()
    const [a, b, c] = ['a', 'b', 'c'].map(open)
    const x = edge.embed([1, 5])
    await Promise.all(
      [a, b, c].map((s) => queue.enqueue({ session: s, stepId: 1, startPosition: 0, hidden: x, fromUpstream: false }))
    )
    for (const s of [a, b, c]) twin.forward(s.key, x, 0)
    b.upstreamStepId = 5 // as if b were fed by an upstream that already sent step 5
    sessions.close(c)
    const y = edge.embed([9])
    const r = await Promise.allSettled([
      queue.enqueue({ session: a, stepId: 2, startPosition: 2, hidden: y, fromUpstream: false }),
      queue.enqueue({ session: a, stepId: 1, startPosition: 0, hidden: x, fromUpstream: false }).catch((e) => e), // same session: next batch
      queue.enqueue({ session: b, stepId: 3, startPosition: 2, hidden: y, fromUpstream: true }),
      queue.enqueue({ session: c, stepId: 2, startPosition: 2, hidden: y, fromUpstream: false })
    ])
    expect(r[0].status).toBe('fulfilled')
    expect(
      bits((r[0] as PromiseFulfilledResult<{ output: Float32Array }>).value.output).equals(bits(twin.forward(a.key, y, 2)))
    ).toBe(true)
    expect((r[2] as PromiseRejectedResult).reason).toBeInstanceOf(UnauthorizedError)
    expect((r[3] as PromiseRejectedResult).reason).toBeInstanceOf(UnknownSessionError)
    // a step at a gap throws PositionError; the other session's step of the same batch still runs
    const bad = queue.enqueue({ session: b, stepId: 9, startPosition: 7, hidden: y, fromUpstream: true })
    const good = queue.enqueue({ session: a, stepId: 3, startPosition: 2, hidden: y, fromUpstream: false })
    await expect(bad).rejects.toBeInstanceOf(PositionError)
    const g = await good
    expect(bits(g.output).equals(bits(twin.forward(a.key, y, 2)))).toBe(true)
    expect(sessions.isOpen(b)).toBe(true)
  })
})
