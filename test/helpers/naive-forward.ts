import { dequantizeRow, type ModelFile, type WeightMatrix } from '../../shards/index.js'

/**
 * An independent, deliberately plain port of llama2.c run.c forward(): one token at a time,
 * float64 everywhere, weights dequantized to plain arrays. Tests compare the engine against it
 * on models of many shapes.
 */
export function createNaiveModel(model: ModelFile) {
  const c = model.config
  const mat = (w: WeightMatrix): number[][] => {
    const row = new Float32Array(w.cols)
    return Array.from({ length: w.rows }, (_, r) => {
      dequantizeRow(w, r, row)
      return Array.from(row)
    })
  }
  const vec = (name: Parameters<ModelFile['readVector']>[0]) => Array.from(model.readVector(name))
  const layers = Array.from({ length: c.nLayers }, (_, l) => ({
    attnNorm: vec(`blk.${l}.attn_norm`),
    wq: mat(model.readMatrix(`blk.${l}.attn_q`)),
    wk: mat(model.readMatrix(`blk.${l}.attn_k`)),
    wv: mat(model.readMatrix(`blk.${l}.attn_v`)),
    wo: mat(model.readMatrix(`blk.${l}.attn_output`)),
    ffnNorm: vec(`blk.${l}.ffn_norm`),
    w1: mat(model.readMatrix(`blk.${l}.ffn_gate`)),
    w2: mat(model.readMatrix(`blk.${l}.ffn_down`)),
    w3: mat(model.readMatrix(`blk.${l}.ffn_up`))
  }))
  const embed = mat(model.readMatrix('token_embd'))
  const head = mat(model.readMatrix('output'))
  const finalNorm = vec('output_norm')
  const keys: number[][][] = layers.map(() => [])
  const values: number[][][] = layers.map(() => [])

  const matvec = (w: number[][], x: number[]) => w.map((row) => row.reduce((s, v, i) => s + v * x[i], 0))
  const rmsnorm = (x: number[], w: number[]) => {
    const ss = x.reduce((s, v) => s + v * v, 0) / x.length + c.rmsEps
    return x.map((v, i) => (w[i] * v) / Math.sqrt(ss))
  }
  const rope = (x: number[], pos: number) => {
    for (let i = 0; i < x.length; i += 2) {
      const freq = 1 / c.ropeTheta ** ((i % c.headDim) / c.headDim)
      const [cos, sin] = [Math.cos(pos * freq), Math.sin(pos * freq)]
      const [a, b] = [x[i], x[i + 1]]
      x[i] = a * cos - b * sin
      x[i + 1] = a * sin + b * cos
    }
  }

  /** Logits after feeding `token` at position `pos` (positions must come in order). */
  function step(token: number, pos: number): number[] {
    let x = [...embed[token]]
    layers.forEach((L, l) => {
      const xb = rmsnorm(x, L.attnNorm)
      const q = matvec(L.wq, xb)
      const k = matvec(L.wk, xb)
      const v = matvec(L.wv, xb)
      rope(q, pos)
      rope(k, pos)
      keys[l][pos] = k
      values[l][pos] = v
      const out = new Array(c.dim).fill(0)
      for (let h = 0; h < c.nHeads; h++) {
        const kvh = Math.floor(h / (c.nHeads / c.nKvHeads)) * c.headDim
        const scores = []
        for (let p = 0; p <= pos; p++) {
          let s = 0
          for (let i = 0; i < c.headDim; i++) s += q[h * c.headDim + i] * keys[l][p][kvh + i]
          scores.push(s / Math.sqrt(c.headDim))
        }
        const max = Math.max(...scores)
        const e = scores.map((s) => Math.exp(s - max))
        const sum = e.reduce((a, b) => a + b, 0)
        for (let p = 0; p <= pos; p++) {
          for (let i = 0; i < c.headDim; i++) out[h * c.headDim + i] += (e[p] / sum) * values[l][p][kvh + i]
        }
      }
      const attnOut = matvec(L.wo, out)
      x = x.map((v, i) => v + attnOut[i])
      const xb2 = rmsnorm(x, L.ffnNorm)
      const g = matvec(L.w1, xb2)
      const u = matvec(L.w3, xb2)
      const hb = g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i])
      const down = matvec(L.w2, hb)
      x = x.map((v, i) => v + down[i])
    })
    return matvec(head, rmsnorm(x, finalNorm))
  }
  return { step }
}
