import { f32ToF16 } from '../../shards/f16.js'
import type { ModelFile } from '../../shards/model/model-file.js'
import { QUANT_LAYOUTS, type QuantDType, quantRowBytes } from '../../shards/quant/quant-blocks.js'
import type { TensorName, WeightMatrix } from '../../shards/types.js'

export function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Byte offsets of each block's f16 scale fields (d, and dmin/m where the type has one). */
const HALF_FIELDS: Record<Exclude<QuantDType, 'bf16'>, number[]> = {
  q4_0: [0],
  q4_1: [0, 2],
  q5_0: [0],
  q5_1: [0, 2],
  q2_k: [80, 82],
  q3_k: [108],
  q4_k: [0, 2],
  q5_k: [0, 2],
  q6_k: [208]
}

/**
 * Random blocks: random quant and sub-scale bits, f16 scales sized so an element stays below
 * about `scale` (so sums stay finite through a few layers).
 */
export function randomBlockMatrix(dtype: QuantDType, rows: number, cols: number, seed: number, scale = 1): WeightMatrix {
  const rand = rng(seed)
  const data = new Uint8Array(quantRowBytes(dtype, cols) * rows)
  for (let i = 0; i < data.length; i++) data[i] = Math.floor(rand() * 256)
  if (dtype === 'bf16') {
    const f = new Float32Array(1)
    const u = new Uint32Array(f.buffer)
    for (let i = 0; i < data.length / 2; i++) {
      f[0] = (rand() * 2 - 1) * 0.5 * scale
      data[2 * i] = (u[0] >>> 16) & 0xff
      data[2 * i + 1] = u[0] >>> 24
    }
  } else {
    const { blockBytes, blockElems } = QUANT_LAYOUTS[dtype]
    for (let b = 0; b < data.length / blockBytes; b++) {
      for (const [i, at] of HALF_FIELDS[dtype].entries()) {
        const mag = (blockElems === 256 ? 0.002 : i === 0 ? 0.05 : 0.3) * scale
        const h = f32ToF16((rand() * 2 - 1) * mag)
        data[b * blockBytes + at] = h & 0xff
        data[b * blockBytes + at + 1] = h >> 8
      }
    }
  }
  return { dtype, rows, cols, data }
}

/**
 * `base` with every block matrix replaced by random blocks of the type `typeOf` picks for it
 * (embeddings and the head stay as they are): mixtures like llama.cpp's Q4_K_M without a
 * quantiser.
 */
export function withBlockTypes(base: ModelFile, typeOf: (name: string) => QuantDType, scale = 0.25): ModelFile {
  const cache = new Map<string, WeightMatrix>()
  const isBlock = (name: string) => name.startsWith('blk.')
  const matrix = (name: TensorName): WeightMatrix => {
    if (!isBlock(name)) return base.readMatrix(name)
    let m = cache.get(name)
    if (!m) {
      const shape = base.matrixInfo ? base.matrixInfo(name) : base.readMatrix(name)
      let seed = 7
      for (const c of name) seed = Math.imul(seed, 31) + c.charCodeAt(0)
      m = randomBlockMatrix(typeOf(name), shape.rows, shape.cols, seed, scale)
      cache.set(name, m)
    }
    return m
  }
  return {
    ...base,
    readMatrix: matrix,
    matrixInfo: (name) => {
      const m = matrix(name)
      return { dtype: m.dtype, rows: m.rows, cols: m.cols }
    },
    readMatrixInto: (name, into) => into.set(matrix(name).data),
    close: () => base.close()
  }
}
