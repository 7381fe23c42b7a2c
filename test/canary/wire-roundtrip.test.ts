import { describe, expect, it } from 'vitest'
import { WIRE_DTYPES as CANARY_WIRE_DTYPES, wireRoundtrip } from '../../canary/index.js'
import { decodeTensor, encodeTensor, WIRE_DTYPES } from '../../protocol/index.js'

describe('canary wire dtypes', () => {
  it('are the protocol wire dtypes, by the same names (canary/ cannot import protocol/)', () => {
    expect([...CANARY_WIRE_DTYPES]).toEqual([...WIRE_DTYPES])
  })

  it('round-trip as the tensor codec does, bit for bit, for every dtype', () => {
    const dim = 64
    const x = Float32Array.from({ length: 2 * dim }, (_, i) => Math.sin(i * 0.37) * (1 + (i % 7)))
    for (const dtype of WIRE_DTYPES) {
      const wire = decodeTensor(encodeTensor(x, [2, dim], dtype), { shape: [2, dim] })
      expect(wireRoundtrip(x, dim, dtype), dtype).toEqual(wire)
    }
  })
})
