import { describe, expect, it } from 'vitest'
import { loadBlock } from '../../shards/block.js'
import type { GgufValue } from '../../shards/index.js'
import { createFastKernels, createRandomModel, createReferenceKernels, dequantizeRow, parseShape } from '../../shards/index.js'
import { neoxToNormOrder, ropeFrequencies, ropeScalingFromGguf } from '../../shards/model/rope-config.js'
import { moeForward } from '../../shards/moe-block.js'
import { Scratch } from '../../shards/scratch.js'
import type { ModelConfig, TensorName } from '../../shards/types.js'

// The steps issue 34's families add, each against an independent transcription of what
// llama.cpp computes (ggml-cpu ops.cpp rope_yarn / ggml_rope_yarn_corr_dims; llama-graph.cpp
// build_moe_ffn), with data on which leaving the step out changes the result: so removing
// YaRN's ramp, partial rotary, the longrope factors or the MoE renormalisation fails here, and
// `npm run crosscheck -- families` shows the same against llama.cpp itself (docs/architectures.md).

describe('YaRN (rope.scaling.type yarn)', () => {
  const meta = new Map<string, GgufValue>([
    ['qwen3.rope.scaling.type', 'yarn'],
    ['qwen3.rope.scaling.factor', 4],
    ['qwen3.rope.scaling.original_context_length', 4096],
    ['qwen3.rope.freq_base', 1000000],
    ['qwen3.context_length', 16384]
  ])
  const k = (key: string, fallback?: number) => {
    const v = meta.get(`qwen3.${key}`)
    return typeof v === 'number' ? v : (fallback as number)
  }
  const r = ropeScalingFromGguf('qwen3', k, meta, new Map(), 'mem', 128, () => new Float32Array())

  it('reads the correction dims, magnitude and frequencies as ggml computes them', () => {
    // corr_dim(β) = n_dims · ln(n_ctx_orig / (β · 2π)) / (2 ln base), floor / ceil.
    const dim = (beta: number) => (128 * Math.log(4096 / (beta * 2 * Math.PI))) / (2 * Math.log(1e6))
    expect(r.ropeYarn).toEqual({ extFactor: 1, corrLow: Math.floor(dim(32)), corrHigh: Math.ceil(dim(1)) })
    expect(r.ropeMagnitude).toBeCloseTo(1 + 0.1 * Math.log(4), 5)
    const c = { headDim: 128, ropeTheta: 1e6, ...r }
    const freqs = ropeFrequencies(c)
    let plain = 0
    for (let j = 0; j < 64; j++) {
      const extrap = 1e6 ** (-(2 * j) / 128)
      const ramp =
        1 - Math.min(1, Math.max(0, (j - Math.floor(dim(32))) / Math.max(0.001, Math.ceil(dim(1)) - Math.floor(dim(32)))))
      const want = extrap * 0.25 * (1 - ramp) + extrap * ramp
      expect(freqs[j] / want, `pair ${j}`).toBeCloseTo(1, 5)
      if (Math.abs(freqs[j] - extrap * 0.25) > 1e-9 * extrap) plain++
    }
    // Without the ramp every pair would be interpolated (×¼): here a good part is not.
    expect(plain).toBeGreaterThan(10)
  })
})

describe('partial rotary with longrope factors (phi3)', () => {
  it('rotates the first n_rot dims of each NEOX head as the paper, and leaves the rest', () => {
    const headDim = 16
    const nRot = 12
    const factors = [1, 1.5, 2, 3, 1.25, 7]
    const c = { headDim, ropeTheta: 10000, ropeFreqScale: 1, ropeFreqFactors: factors, ropeDims: nRot }
    const freqs = ropeFrequencies(c)
    const order = neoxToNormOrder(headDim, nRot)
    const x = Float32Array.from({ length: headDim }, (_, i) => Math.cos(i * 1.7) + 0.1 * i)
    const pos = 37
    // The engine: rows in NORM order, adjacent pairs rotated (kernels-ref.ts rope).
    const permuted = Float32Array.from(order, (o) => x[o])
    createReferenceKernels().rope(permuted, 1, 1, headDim, pos, 10000, freqs)
    const got = new Float32Array(headDim)
    order.forEach((o, i) => {
      got[o] = permuted[i]
    })
    // Independently: NEOX pairs (i, i + n_rot/2), angle pos · θ^(-2i/n_rot) / factor[i].
    const want = Float64Array.from(x)
    for (let i = 0; i < nRot / 2; i++) {
      const a = (pos * 10000 ** (-(2 * i) / nRot)) / factors[i]
      want[i] = x[i] * Math.cos(a) - x[i + nRot / 2] * Math.sin(a)
      want[i + nRot / 2] = x[i] * Math.sin(a) + x[i + nRot / 2] * Math.cos(a)
    }
    for (let i = 0; i < headDim; i++) expect(got[i], `dim ${i}`).toBeCloseTo(want[i], 5)
    for (let i = nRot; i < headDim; i++) expect(got[i]).toBe(x[i])
  })
})

describe('mixture of experts (qwen3moe)', () => {
  const model = createRandomModel(parseShape('64,1,4,2,96,300'), {
    dtype: 'f32',
    seed: 9,
    arch: { architecture: 'qwen3moe', headDim: 16, experts: { count: 8, used: 2, hidden: 32 } }
  })
  const c = model.config as ModelConfig
  const kernels = createReferenceKernels()
  const rows = (name: TensorName): number[][] => {
    const w = model.readMatrix(name)
    const row = new Float32Array(w.cols)
    return Array.from({ length: w.rows }, (_, r) => {
      dequantizeRow(w, r, row)
      return Array.from(row)
    })
  }
  const dot = (w: number[][], x: ArrayLike<number>) => w.map((r) => r.reduce((s, v, i) => s + v * x[i], 0))
  const expert = (e: number, x: ArrayLike<number>) => {
    const g = dot(rows(`blk.0.ffn_gate_exps.${e}`), x)
    const u = dot(rows(`blk.0.ffn_up_exps.${e}`), x)
    return dot(
      rows(`blk.0.ffn_down_exps.${e}`),
      g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i])
    )
  }

  it('routes each row to its top-k experts by softmax and sums their renormalised outputs', () => {
    const T = 5
    const s = new Scratch(c)
    s.ensure(T)
    const x = Float32Array.from({ length: T * c.dim }, (_, i) => Math.sin(i * 0.37) * 1.5)
    s.xb.set(x)
    const m = {
      router: kernels.prepare(model.readMatrix('blk.0.ffn_gate_inp')),
      experts: Array.from({ length: 8 }, (_, e) => ({
        gate: kernels.prepare(model.readMatrix(`blk.0.ffn_gate_exps.${e}`)),
        up: kernels.prepare(model.readMatrix(`blk.0.ffn_up_exps.${e}`)),
        down: kernels.prepare(model.readMatrix(`blk.0.ffn_down_exps.${e}`))
      }))
    }
    moeForward(kernels, c, m, s, T)
    const router = rows('blk.0.ffn_gate_inp')
    let unnormDiff = 0
    for (let t = 0; t < T; t++) {
      const xt = x.subarray(t * c.dim, (t + 1) * c.dim)
      const logits = dot(router, xt)
      const max = Math.max(...logits)
      const p = logits.map((l) => Math.exp(l - max))
      const z = p.reduce((a, b) => a + b, 0)
      const top = p
        .map((v, e) => [v / z, e])
        .sort((a, b) => b[0] - a[0])
        .slice(0, 2)
      const wsum = top[0][0] + top[1][0]
      const want = new Array(c.dim).fill(0)
      const unnorm = new Array(c.dim).fill(0)
      for (const [w, e] of top) {
        const y = expert(e, xt)
        y.forEach((v, d) => {
          want[d] += (w / wsum) * v
          unnorm[d] += w * v
        })
      }
      for (let d = 0; d < c.dim; d++) {
        expect(s.xb[t * c.dim + d], `row ${t} dim ${d}`).toBeCloseTo(want[d], 4)
        unnormDiff = Math.max(unnormDiff, Math.abs(unnorm[d] - want[d]))
      }
    }
    // Leaving out the renormalisation would move outputs far beyond the tolerance above.
    expect(unnormDiff).toBeGreaterThan(1e-2)
  })
})

describe('mixture of experts (qwen2moe): routed experts without renormalisation, plus the gated shared expert', () => {
  const model = createRandomModel(parseShape('64,1,4,2,96,300,untied'), {
    dtype: 'f32',
    seed: 10,
    arch: { architecture: 'qwen2moe', experts: { count: 8, used: 2, hidden: 32, shared: 64 } }
  })
  const c = model.config as ModelConfig
  const kernels = createReferenceKernels()
  const rows = (name: TensorName): number[][] => {
    const w = model.readMatrix(name)
    const row = new Float32Array(w.cols)
    return Array.from({ length: w.rows }, (_, r) => {
      dequantizeRow(w, r, row)
      return Array.from(row)
    })
  }
  const dot = (w: number[][], x: ArrayLike<number>) => w.map((r) => r.reduce((s, v, i) => s + v * x[i], 0))
  const ffn = (gate: TensorName, up: TensorName, down: TensorName, x: ArrayLike<number>) => {
    const g = dot(rows(gate), x)
    const u = dot(rows(up), x)
    return dot(
      rows(down),
      g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i])
    )
  }

  it('sums the top-k experts by their softmax probabilities and adds sigmoid(gate · x) × the shared expert', () => {
    expect(c.moe).toMatchObject({ normTopK: false, sharedHidden: 64 })
    const T = 5
    const s = new Scratch(c)
    s.ensure(T)
    const x = Float32Array.from({ length: T * c.dim }, (_, i) => Math.cos(i * 0.29) * 1.5)
    s.xb.set(x)
    const loaded = loadBlock(model, 0, kernels)
    if (!loaded.moe?.shared) throw new Error('no shared expert loaded')
    moeForward(kernels, c, loaded.moe, s, T)
    const router = rows('blk.0.ffn_gate_inp')
    const gateVec = model.readVector('blk.0.ffn_gate_inp_shexp')
    let renormDiff = 0
    let sharedSize = 0
    for (let t = 0; t < T; t++) {
      const xt = x.subarray(t * c.dim, (t + 1) * c.dim)
      const logits = dot(router, xt)
      const max = Math.max(...logits)
      const p = logits.map((l) => Math.exp(l - max))
      const z = p.reduce((a, b) => a + b, 0)
      const top = p
        .map((v, e) => [v / z, e])
        .sort((a, b) => b[0] - a[0])
        .slice(0, 2)
      const wsum = top[0][0] + top[1][0]
      const g = gateVec.reduce((acc, v, i) => acc + v * xt[i], 0)
      const sig = 1 / (1 + Math.exp(-g))
      const shared = ffn('blk.0.ffn_gate_shexp', 'blk.0.ffn_up_shexp', 'blk.0.ffn_down_shexp', xt)
      const want = shared.map((v) => sig * v)
      const renorm = [...want]
      for (const [w, e] of top) {
        const y = ffn(`blk.0.ffn_gate_exps.${e}`, `blk.0.ffn_up_exps.${e}`, `blk.0.ffn_down_exps.${e}`, xt)
        y.forEach((v, d) => {
          want[d] += w * v
          renorm[d] += (w / wsum) * v
        })
      }
      for (let d = 0; d < c.dim; d++) {
        expect(s.xb[t * c.dim + d], `row ${t} dim ${d}`).toBeCloseTo(want[d], 4)
        renormDiff = Math.max(renormDiff, Math.abs(renorm[d] - want[d]))
        sharedSize = Math.max(sharedSize, Math.abs(sig * shared[d]))
      }
    }
    // Renormalising (as qwen3moe and Mixtral do) or leaving out the shared expert would fail above.
    expect(renormDiff).toBeGreaterThan(1e-2)
    expect(sharedSize).toBeGreaterThan(1e-2)
  })
})

describe('mixture of experts (Mixtral: llama with llama.expert_count)', () => {
  it('reads as a llama MoE: experts feed_forward_length wide, top-k weights renormalised', () => {
    const model = createRandomModel(parseShape('64,1,4,2,96,300'), {
      dtype: 'f32',
      seed: 11,
      arch: { architecture: 'llama', experts: { count: 8, used: 2, hidden: 96 } }
    })
    expect(model.config.moe).toEqual({ nExperts: 8, nUsed: 2, expertHidden: 96, normTopK: true, sharedHidden: 0 })
    expect(model.config.ropeType).toBe('norm')
    expect(model.hasTensor('blk.0.ffn_gate')).toBe(false)
    expect(model.metadata.get('llama.expert_count')).toBe(8)
    expect(model.metadata.has('llama.expert_feed_forward_length')).toBe(false)
  })

  it('experts with gate and up stacked into one matmul give the bits of gate and up apart', () => {
    const model = createRandomModel(parseShape('64,1,4,2,96,300'), {
      dtype: 'q4_k_m',
      seed: 12,
      arch: { architecture: 'llama', experts: { count: 4, used: 2, hidden: 256 } }
    })
    const c = model.config as ModelConfig
    for (const kernels of [createReferenceKernels(), createFastKernels({ threads: 1 })]) {
      const stacked = loadBlock(model, 0, kernels).moe
      if (!stacked) throw new Error('no experts loaded')
      expect(stacked.experts.every((e) => e.up === undefined && e.gate.rows === 512)).toBe(true)
      const apart = {
        router: stacked.router,
        experts: stacked.experts.map((_, e) => ({
          gate: kernels.prepare(model.readMatrix(`blk.0.ffn_gate_exps.${e}`)),
          up: kernels.prepare(model.readMatrix(`blk.0.ffn_up_exps.${e}`)),
          down: kernels.prepare(model.readMatrix(`blk.0.ffn_down_exps.${e}`))
        }))
      }
      const run = (m: typeof stacked, T: number) => {
        const s = new Scratch(c)
        s.ensure(T)
        s.xb.set(Float32Array.from({ length: T * c.dim }, (_, i) => Math.sin(i * 0.41) * 1.3))
        moeForward(kernels, c, m, s, T)
        return Buffer.from(s.xb.slice(0, T * c.dim).buffer)
      }
      for (const T of [1, 4]) expect(run(stacked, T).equals(run(apart, T)), `${kernels.name} T=${T}`).toBe(true)
      kernels.close?.()
    }
  })
})
