/**
 * RoPE with adjacent pairs (llama2.c, GGUF), bit-identical to the reference in kernels-ref.ts:
 * the same expressions, but cos/sin are computed once per (position, pair) of a call instead
 * of once per head.
 */
export interface RopeTables {
  apply(x: Float32Array, T: number, nHeads: number, headDim: number, startPos: number, theta: number, given?: Float64Array): void
}

export function createRopeTables(): RopeTables {
  let cos = new Float64Array(0)
  let sin = new Float64Array(0)
  let freqKey = ''
  let freqs: Float64Array = new Float64Array(0)
  return {
    apply(x, T, nHeads, headDim, startPos, theta, given) {
      const half = headDim >> 1
      const key = `${headDim}/${theta}`
      if (given) {
        freqs = given
        freqKey = ''
      } else if (key !== freqKey) {
        freqs = new Float64Array(half)
        for (let j = 0; j < half; j++) freqs[j] = 1 / theta ** ((2 * j) / headDim)
        freqKey = key
      }
      if (cos.length < half) {
        cos = new Float64Array(half)
        sin = new Float64Array(half)
      }
      const width = nHeads * headDim
      for (let t = 0; t < T; t++) {
        const pos = startPos + t
        for (let j = 0; j < half; j++) {
          const val = pos * freqs[j]
          cos[j] = Math.cos(val)
          sin[j] = Math.sin(val)
        }
        for (let h = 0; h < nHeads; h++) {
          const base = t * width + h * headDim
          for (let j = 0; j < half; j++) {
            const o = base + 2 * j
            const v0 = x[o]
            const v1 = x[o + 1]
            x[o] = v0 * cos[j] - v1 * sin[j]
            x[o + 1] = v0 * sin[j] + v1 * cos[j]
          }
        }
      }
    }
  }
}
