import { describe, expect, it } from 'vitest'
import { type BatchJob, StepBatcher } from '../../node/daemon/step-batcher.js'
import { InvalidBatchOptionsError } from '../../node/errors.js'
import { BusyError } from '../../protocol/index.js'

// The node's batch scheduler (issue #18): FIFO order with the oldest step first in every batch,
// one step per session per batch, a row cap, a queue cap answered with BUSY, and a failing step
// that fails only itself.

type Job = BatchJob<string>
const job = (key: string, rows = 1, group = 'g'): Job => ({ key, group, rows, input: `${key}:${rows}` })

function recorder(fail: (j: Job) => boolean = () => false) {
  const batches: string[][] = []
  const batcher = new StepBatcher<string, string>({
    maxQueued: 8,
    maxBatchRows: 4,
    run: (jobs) => {
      batches.push(jobs.map((j) => j.input))
      if (jobs.some(fail)) throw new Error(`bad step in ${jobs.map((j) => j.key).join(',')}`)
      return jobs.map((j) => `out ${j.input}`)
    }
  })
  return { batches, batcher }
}

describe('StepBatcher', () => {
  it('runs steps that arrive together as one batch and resolves each with its own result', async () => {
    const { batches, batcher } = recorder()
    const got = await Promise.all(['a', 'b', 'c'].map((k) => batcher.submit(job(k))))
    expect(got).toEqual(['out a:1', 'out b:1', 'out c:1'])
    expect(batches).toEqual([['a:1', 'b:1', 'c:1']])
  })

  it('keeps FIFO order, a session once per batch, the row cap and span groups', async () => {
    const { batches, batcher } = recorder()
    const all = [
      batcher.submit(job('a', 2)),
      batcher.submit(job('a', 1)), // same session: next batch
      batcher.submit(job('x', 1, 'other')), // other span: its own batch
      batcher.submit(job('b', 3)), // would pass 4 rows: waits
      batcher.submit(job('c', 2))
    ]
    await Promise.all(all)
    expect(batches).toEqual([['a:2', 'c:2'], ['a:1', 'b:3'], ['x:1']])
    // the oldest job waiting always starts the next batch: x (queued 3rd) ran once it was the head
  })

  it('a job over the row cap runs alone', async () => {
    const { batches, batcher } = recorder()
    await Promise.all([batcher.submit(job('big', 9)), batcher.submit(job('b'))])
    expect(batches).toEqual([['big:9'], ['b:1']])
  })

  it('answers BUSY beyond the queue cap and serves the rest', async () => {
    const { batcher } = recorder()
    const ok = Array.from({ length: 8 }, (_, i) => batcher.submit(job(`s${i}`)))
    await expect(batcher.submit(job('late'))).rejects.toBeInstanceOf(BusyError)
    expect(batcher.busy).toBe(1)
    expect(batcher.queued).toBe(8)
    expect((await Promise.all(ok)).length).toBe(8)
    expect(batcher.queued).toBe(0)
    await expect(batcher.submit(job('after'))).resolves.toBe('out after:1')
  })

  it("a failing step fails alone: the others' steps still get their results", async () => {
    const { batches, batcher } = recorder((j) => j.key === 'bad')
    const results = await Promise.allSettled(['a', 'bad', 'c'].map((k) => batcher.submit(job(k))))
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect((results[0] as PromiseFulfilledResult<string>).value).toBe('out a:1')
    expect(batches[0]).toEqual(['a:1', 'bad:1', 'c:1'])
    expect(batches.slice(1)).toEqual([['a:1'], ['bad:1'], ['c:1']])
  })

  it('an Error result rejects only its own step', async () => {
    const batcher = new StepBatcher<string, string>({
      maxQueued: 4,
      maxBatchRows: 4,
      run: (jobs) => jobs.map((j) => (j.key === 'b' ? new BusyError('no') : j.input))
    })
    const r = await Promise.allSettled(['a', 'b'].map((k) => batcher.submit(job(k))))
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'rejected'])
  })

  it('an aborted step leaves the queue without running', async () => {
    const { batches, batcher } = recorder()
    const ac = new AbortController()
    const p = batcher.submit(job('gone'), { signal: ac.signal })
    const q = batcher.submit(job('stays'))
    ac.abort(new Error('client went away'))
    await expect(p).rejects.toThrow('client went away')
    await q
    expect(batches).toEqual([['stays:1']])
  })

  it('steps that arrive while a batch runs join the next one (round after round)', async () => {
    const order: string[][] = []
    let round = 0
    const batcher: StepBatcher<string, string> = new StepBatcher<string, string>({
      maxQueued: 8,
      maxBatchRows: 8,
      run: (jobs) => {
        order.push(jobs.map((j) => j.key))
        // a new session shows up during the first batch: it runs with the others' next steps
        if (round++ === 0) void batcher.submit(job('new'))
        return jobs.map((j) => j.key)
      }
    })
    await Promise.all([batcher.submit(job('a')), batcher.submit(job('b'))])
    await Promise.all([batcher.submit(job('a')), batcher.submit(job('b'))])
    expect(order).toEqual([
      ['a', 'b'],
      ['new', 'a', 'b']
    ])
  })

  it('checks its options', () => {
    const run = () => []
    expect(() => new StepBatcher({ maxQueued: 0, maxBatchRows: 1, run })).toThrow(InvalidBatchOptionsError)
    expect(() => new StepBatcher({ maxQueued: 1, maxBatchRows: 0.5, run })).toThrow(InvalidBatchOptionsError)
    expect(() => new StepBatcher({ maxQueued: 1, maxBatchRows: 1, gatherMs: -1, run })).toThrow(InvalidBatchOptionsError)
  })
})
