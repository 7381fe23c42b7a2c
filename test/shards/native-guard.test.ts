import { afterAll, describe, expect, it } from 'vitest'
import { createFastKernels, type FastKernels } from '../../shards/index.js'
import { matmulExact } from '../../shards/kernels/kernels-ref-exact.js'
import { loadNativeAddon } from '../../shards/native/load.js'
import type { QuantDType } from '../../shards/quant/quant-blocks.js'
import { randomBlockMatrix, rng } from '../helpers/random-blocks.js'

// Kernels must not read past a matrix's last byte. Native buffers (addon.cc allocBuffer) end in
// an inaccessible page, and a matrix of a whole number of pages ends right before it: 2048
// blocks of Q6_K (210 bytes) or Q3_K (110 bytes) are 105 and 55 pages. Both types keep d in
// their block's last two bytes, which a 4-byte gather at d read 2 bytes past (an 8b Q4_K_M
// ffn_down, 4096 × 14336 Q6_K, is 11760 pages: an intermittent crash when the next page was
// unmapped). Every weight goes to a native buffer here (heapWeightBytes 0).

const addon = loadNativeAddon()
const open: FastKernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

describe.skipIf(!addon?.quantTypes || typeof addon.allocBuffer !== 'function')('reads stay inside native buffers', () => {
  for (const dtype of ['q6_k', 'q3_k', 'q4_k'] as QuantDType[]) {
    for (const keepRows of [true, false]) {
      it(`${dtype} 64x8192 ending at a page boundary, ${keepRows ? 'plain' : 'rows8 where repacked'}: decode and batched`, () => {
        const k = createFastKernels({ threads: 1, heapWeightBytes: 0 })
        open.push(k)
        const w = randomBlockMatrix(dtype, 64, 8192, 17)
        expect(w.data.byteLength % 4096).toBe(0)
        const prepared = k.prepareInto?.({ dtype, rows: 64, cols: 8192 }, (d) => d.set(w.data), { keepRows })
        if (!prepared) throw new Error('no prepareInto')
        expect(k.placement?.().nativeBufferBytes).toBe(w.data.byteLength)
        for (const T of [1, 3, 9]) {
          const rand = rng(T)
          const x = Float32Array.from({ length: T * 8192 }, () => rand() * 2 - 1)
          const exact = new Float32Array(T * 64)
          matmulExact(exact, x, w, T)
          const out = new Float32Array(T * 64)
          k.matmul(out, x, prepared, T)
          expect(out).toEqual(exact)
        }
      })
    }
  }
})
