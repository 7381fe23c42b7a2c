/**
 * The CI slice of `npm run fuzz` (issue #17): a short seeded run of the protocol fuzzer against a
 * real node process and a real client. The full counts are run by hand (docs/security.md).
 */
import { describe, expect, it } from 'vitest'
import { fuzzClient } from '../../bench/fuzz/client-target.js'
import { fuzzNode, NODE_MESSAGE_TYPES } from '../../bench/fuzz/node-target.js'
import { GGUF_PATH } from '../helpers/reference.js'

describe('seeded protocol fuzzing (short slice)', () => {
  it('a real node answers fuzz frames of every request type with typed errors, stays up and keeps an honest session bit-identical', async () => {
    const s = await fuzzNode({ frames: 48, seed: 20261203, attackers: 2, model: GGUF_PATH, honestEvery: 40 })
    expect(s.nodeAlive).toBe(true)
    expect(s.internalErrors).toBe(0)
    expect(s.honestBitIdentical).toBe(true)
    expect(s.honestSteps).toBeGreaterThan(8)
    // frames count once the node read them: every type got its 48
    expect(s.framesSent).toBe(48 * NODE_MESSAGE_TYPES.length)
    for (const n of Object.values(s.sentPerType)) expect(n).toBe(48)
    expect(s.framesAnswered).toBeGreaterThan(48 * 4)
    // every reply the node owed came, well-formed
    expect(s.replyTimeouts).toBe(0)
    expect(s.undecodableReplies).toBe(0)
    expect(s.nodePeakRssMiB).toBeLessThan(400)
    // memory checkpoints at the start and every 10% of the frames, each read after a full GC
    expect(s.nodeMemory.length).toBeGreaterThanOrEqual(11)
    for (const c of s.nodeMemory) expect(c.afterGc && c.heapUsedMiB > 0 && c.rssMiB > 0).toBe(true)
    expect(s.nodeMemoryVerdict.withinBound).toBe(true)
    // once the attackers left, the node holds for them no more than before they came: no stop-signal
    // link per frame read, no stream, no reserved byte (test/protocol/stream-records.test.ts)
    const { before, after } = s.nodeRecords
    expect(after.stop_signal_links).toBeLessThanOrEqual(before.stop_signal_links)
    expect(after.streams).toBeLessThanOrEqual(before.streams)
    expect(after.bytes_in_flight).toBe(0)
    expect(after.rate_limited_peers).toBeLessThanOrEqual(3)
  }, 240_000)

  it('a real client rejects hostile replies with typed errors, none unhandled', async () => {
    const s = await fuzzClient({ replies: 400, seed: 20261203 })
    expect(s.untypedErrors).toBe(0)
    expect(s.unhandledRejections).toBe(0)
    expect(Object.values(s.outcomes).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(400)
  }, 240_000)
})
