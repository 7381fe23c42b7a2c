import { afterEach, describe, expect, it, vi } from 'vitest'
import { ByteRate } from '../../client/index.js'

// Issue 33: a seeder's upload cap (node/weights/bandwidth.ts), on a fake clock: what is checked is
// the order of events against simulated time, not how fast this machine is.

afterEach(() => {
  vi.useRealTimers()
})

describe('ByteRate (seeder upload cap)', () => {
  it('lets a second of bytes through at once, then holds the next until the clock has refilled it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] })
    const rate = new ByteRate(1_000_000)
    await rate.take(1_000_000)
    let second = false
    const p = rate.take(500_000).then(() => {
      second = true
    })
    await vi.advanceTimersByTimeAsync(400)
    expect(second).toBe(false)
    await vi.advanceTimersByTimeAsync(150)
    await p
    expect(second).toBe(true)
  })

  it('0 means no cap, and an aborted wait rejects', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] })
    await new ByteRate(0).take(1e12)
    const rate = new ByteRate(1000)
    await rate.take(1000)
    const ac = new AbortController()
    const p = rate.take(1000, { signal: ac.signal })
    ac.abort()
    await expect(p).rejects.toThrow()
  })
})
