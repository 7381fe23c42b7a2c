import { describe, expect, it } from 'vitest'
import { randomSessionId, SESSION_ID_BYTES } from '../../client/session/session-id.js'

describe('randomSessionId (issue #17: unguessable hop session ids)', () => {
  it('is 128 random bits in hex, never repeated', () => {
    const ids = Array.from({ length: 10_000 }, () => randomSessionId())
    expect(SESSION_ID_BYTES * 8).toBe(128)
    for (const id of ids.slice(0, 100)) expect(id).toMatch(/^[0-9a-f]{32}$/)
    expect(new Set(ids).size).toBe(ids.length)
    // every bit position is set about half the time (a counter or a shared prefix would not be)
    const ones = new Array<number>(128).fill(0)
    for (const id of ids) {
      const b = Buffer.from(id, 'hex')
      for (let i = 0; i < 128; i++) ones[i] += (b[i >> 3] >> (i & 7)) & 1
    }
    // Binomial(10000, 1/2) has sd 50: 4,700..5,300 is six sd either side
    for (const n of ones) expect(n).toBeGreaterThan(4_700)
    for (const n of ones) expect(n).toBeLessThan(5_300)
  })
})
