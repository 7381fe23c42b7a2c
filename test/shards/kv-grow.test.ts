import { describe, expect, it } from 'vitest'
import { grownKvCapacity, KV_INITIAL_POSITIONS, KvCache, type KvDType } from '../../shards/index.js'

/*
 * Issue #39: a session's KV is held as it is filled. The cache opens with KV_INITIAL_POSITIONS
 * positions and doubles (copying what it holds) up to its maxLength; what it held reads the same
 * after a growth, in every KV dtype.
 */

/** Export-layout bytes of `positions` positions of a cache like `c`, seeded. */
function rows(c: KvCache, positions: number, seed: number): Uint8Array {
  const probe = new KvCache(c.layers.length, c.kvDim, positions, c.dtype)
  const out = new Uint8Array(positions * probe.bytesPerPosition)
  let x = seed
  for (let i = 0; i < out.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}

describe('KV cache held as it is filled', () => {
  it('grows by doubling up to maxLength', () => {
    expect(grownKvCapacity(64, 65, 512)).toBe(128)
    expect(grownKvCapacity(64, 300, 512)).toBe(512)
    expect(grownKvCapacity(64, 300, 400)).toBe(400)
    expect(grownKvCapacity(128, 100, 512)).toBe(128)
  })

  for (const dtype of ['f32', 'f16', 'q8_0'] as KvDType[])
    it(`${dtype}: what it holds reads the same across growths; past maxLength is out of cache`, () => {
      const c = new KvCache(2, 64, 300, dtype)
      expect(c.capacity).toBe(KV_INITIAL_POSITIONS)
      const atOpen = c.sizeBytes
      const first = rows(c, 50, 1)
      c.importRows(0, first)
      expect(c.capacity).toBe(KV_INITIAL_POSITIONS)
      const second = rows(c, 150, 2)
      c.importRows(50, second)
      expect(c.capacity).toBe(256)
      expect(c.sizeBytes).toBe(atOpen * 4)
      expect(Buffer.from(c.exportRows(0, 50)).equals(Buffer.from(first))).toBe(true)
      expect(Buffer.from(c.exportRows(50, 200)).equals(Buffer.from(second))).toBe(true)
      c.importRows(200, rows(c, 100, 3))
      expect(c.capacity).toBe(300)
      expect(Buffer.from(c.exportRows(0, 50)).equals(Buffer.from(first))).toBe(true)
      expect(() => c.reserve(300, 1)).toThrow(/do not fit/)
    })
})
