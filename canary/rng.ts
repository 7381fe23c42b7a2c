/**
 * Small seeded randomness shared by the canary code and the node's tamper modes: FNV-1a for
 * hashing keys to seeds, mulberry32 for uniform draws and Box–Muller for normal draws. Every
 * consumer is deterministic given its seed.
 */

/** 32-bit FNV-1a over a string key and a numeric seed. */
export function hashSeed(seed: number, key: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0)
  h = Math.imul(h, 0x01000193) >>> 0
  h ^= Math.floor(seed / 2 ** 32) >>> 0
  h = Math.imul(h, 0x01000193) >>> 0
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h >>> 0
}

export interface Random {
  /** Uniform in [0, 1). */
  next(): number
  /** Standard normal N(0, 1) (Box–Muller). */
  normal(): number
  /** Uniform integer in [0, n). */
  int(n: number): number
}

/** mulberry32 (Tommy Ettinger): a 32-bit state generator, ample for sampling decisions. */
export function createRandom(seed: number): Random {
  let a = seed >>> 0
  let spare: number | undefined
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    normal() {
      if (spare !== undefined) {
        const s = spare
        spare = undefined
        return s
      }
      const u = 1 - next()
      const v = next()
      const r = Math.sqrt(-2 * Math.log(u))
      spare = r * Math.sin(2 * Math.PI * v)
      return r * Math.cos(2 * Math.PI * v)
    },
    int(n) {
      return Math.floor(next() * n)
    }
  }
}
