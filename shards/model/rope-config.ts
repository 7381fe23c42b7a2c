import { InvalidModelError, UnsupportedModelError } from '../errors.js'
import type { GgufTensorInfo } from '../formats/gguf-reader.js'
import type { Architecture, ModelConfig, RopeYarn } from '../types.js'
import type { GgufValue } from './model-file.js'

/*
 * RoPE scalings as llama.cpp reads them from GGUF (issue 34 item 3; src/llama-model.cpp
 * load_hparams, src/llama-context.cpp's yarn_attn_factor, ggml-cpu ops.cpp rope_yarn and
 * ggml.c ggml_rope_yarn_corr_dims):
 *  - partial rotary: `rope.dimension_count` < head size rotates the first n_rot dims of each head
 *    (θ_j = θ^(-2j/n_rot)); the rest pass through (Phi-3.5/4-mini, StableLM, NeoX shapes).
 *  - linear: positions × 1/`rope.scaling.factor`.
 *  - llama3: the `rope_freqs` tensor divides each pair's frequency (Llama 3.1+).
 *  - longrope (Phi-3 128k, Phi-3.5): `rope_factors_short` / `rope_factors_long` divide the
 *    frequencies, short while the context fits `rope.scaling.original_context_length` (llama.cpp
 *    picks by n_ctx; the engine by the model's context_length), and cos/sin are scaled by
 *    `rope.scaling.attn_factor`. The converter writes no scaling type for them (linear, factor 1).
 *  - yarn (Qwen 2.5 long context, DeepSeek): per pair, interpolated and extrapolated angles
 *    mixed by a ramp between the correction dims of β_fast / β_slow, and cos/sin scaled by
 *    mscale = attn_factor · (1 + 0.1·ln(factor)).
 */

type NumberKey = (key: string, fallback?: number) => number

export interface RopeScaling {
  readonly ropeFreqScale: number
  readonly ropeFreqFactors: readonly number[] | null
  readonly ropeDims?: number
  readonly ropeMagnitude?: number
  readonly ropeYarn?: RopeYarn
}

const fr = Math.fround

/** ggml_rope_yarn_corr_dim in float32 steps. */
function corrDim(nDims: number, nCtxOrig: number, nRot: number, base: number): number {
  return fr(fr(nDims * fr(Math.log(fr(nCtxOrig / fr(nRot * fr(2 * fr(Math.PI))))))) / fr(2 * fr(Math.log(base))))
}

export function ropeScalingFromGguf(
  a: Architecture,
  k: NumberKey,
  meta: ReadonlyMap<string, GgufValue>,
  tensors: ReadonlyMap<string, GgufTensorInfo>,
  path: string,
  headDim: number,
  readVector: (name: string) => Float32Array
): RopeScaling {
  const ropeDims = k('rope.dimension_count', headDim)
  if (!Number.isInteger(ropeDims) || ropeDims < 2 || ropeDims % 2 !== 0 || ropeDims > headDim)
    throw new InvalidModelError(`${path}: rope.dimension_count ${ropeDims} is not an even count within the head size ${headDim}`)
  if (ropeDims !== headDim && a === 'llama')
    // llama.cpp refuses it too (load_hparams: "invalid n_rot").
    throw new UnsupportedModelError(`${path}: partial RoPE (${ropeDims} of ${headDim} dims) in a llama model is not supported`)
  const scaling = meta.get(`${a}.rope.scaling.type`) ?? 'linear'
  if (typeof scaling !== 'string' || !['none', 'linear', 'llama3', 'yarn', 'longrope'].includes(scaling))
    throw new UnsupportedModelError(
      `${path}: RoPE scaling ${JSON.stringify(scaling)} is not supported (none, linear, llama3, yarn, longrope)`
    )
  const factor = k('rope.scaling.factor', 0) || k('rope_scaling.factor', 0)
  if (!(factor >= 0) || !Number.isFinite(factor))
    throw new InvalidModelError(`${path}: rope.scaling.factor ${factor} is not positive`)
  // 'llama3' is the engine's own name for rope_freqs files (llama.cpp has no such type): no factor.
  const ropeFreqScale = scaling === 'none' || scaling === 'llama3' || factor === 0 ? 1 : fr(1 / factor)
  const nCtxOrig = k('rope.scaling.original_context_length', k('context_length'))
  const attnFactor = k('rope.scaling.attn_factor', 1)
  if (!(attnFactor > 0)) throw new InvalidModelError(`${path}: rope.scaling.attn_factor ${attnFactor} is not positive`)
  const half = ropeDims / 2
  const vector = (name: string): number[] => {
    const t = tensors.get(`${name}.weight`)
    if (!t) throw new InvalidModelError(`${path}: no ${name}.weight tensor`)
    if (t.ne[0] !== half) throw new InvalidModelError(`${path}: ${name} has ${t.ne[0]} values, need ${half}`)
    const v = Array.from(readVector(name))
    if (v.some((f) => !(f > 0) || !Number.isFinite(f)))
      throw new InvalidModelError(`${path}: ${name} holds a value that is not a positive number`)
    return v
  }
  let ropeFreqFactors: number[] | null = null
  if (tensors.has('rope_freqs.weight')) ropeFreqFactors = vector('rope_freqs')
  else if (tensors.has('rope_factors_short.weight') || tensors.has('rope_factors_long.weight'))
    ropeFreqFactors = vector(k('context_length') > nCtxOrig ? 'rope_factors_long' : 'rope_factors_short')
  let magnitude = fr(attnFactor)
  let ropeYarn: RopeYarn | undefined
  if (scaling === 'yarn' && ropeFreqScale !== 1) {
    // llama-context.cpp: ext_factor 1; attn_factor = get_mscale(factor, 1) / get_mscale(factor,
    // log_mul) (log_mul 0: get_mscale(factor, 1)), then ÷ (1 + 0.1 ln factor), × rope attn_factor;
    // rope_yarn multiplies it again by 1 + 0.1·ln(1/freq_scale).
    const f = fr(1 / ropeFreqScale)
    const mscale = (m: number) => (f <= 1 ? 1 : fr(fr(fr(0.1 * m) * fr(Math.log(f))) + 1))
    const logMul = k('rope.scaling.yarn_log_multiplier', 0)
    let yarnAttn = logMul !== 0 ? fr(mscale(1) / mscale(logMul)) : mscale(1)
    yarnAttn = fr(yarnAttn * fr(1 / fr(1 + fr(0.1 * fr(Math.log(f))))))
    magnitude = fr(fr(yarnAttn * magnitude) * fr(1 + fr(0.1 * fr(Math.log(fr(1 / ropeFreqScale))))))
    const base = k('rope.freq_base', 10000)
    const betaFast = k('rope.scaling.yarn_beta_fast', 32)
    const betaSlow = k('rope.scaling.yarn_beta_slow', 1)
    ropeYarn = {
      extFactor: k('rope.scaling.yarn_ext_factor', 1) < 0 ? 1 : k('rope.scaling.yarn_ext_factor', 1),
      corrLow: Math.max(0, Math.floor(corrDim(ropeDims, nCtxOrig, betaFast, base))),
      corrHigh: Math.min(ropeDims - 1, Math.ceil(corrDim(ropeDims, nCtxOrig, betaSlow, base)))
    }
  }
  return {
    ropeFreqScale,
    ropeFreqFactors,
    ...(ropeDims !== headDim ? { ropeDims } : {}),
    ...(magnitude !== 1 ? { ropeMagnitude: magnitude } : {}),
    ...(ropeYarn ? { ropeYarn } : {})
  }
}

/**
 * RoPE angle per position of each pair j < headDim/2 (float64): θ^(-2j/n_rot) / factor[j],
 * × freqScale (linear), mixed with the unscaled angle by YaRN's ramp; 0 for the pairs past
 * n_rot, which leaves them as they are (cos 1, sin 0). Without scaling it is exactly the llama2.c
 * expression 1 / θ^(2j/headDim) (×1 and ÷1 change no bits).
 */
export function ropeFrequencies(
  c: Pick<ModelConfig, 'headDim' | 'ropeTheta' | 'ropeFreqScale' | 'ropeFreqFactors' | 'ropeDims' | 'ropeYarn'>
): Float64Array {
  const half = c.headDim >> 1
  const nRot = c.ropeDims ?? c.headDim
  const out = new Float64Array(half)
  for (let j = 0; j < nRot >> 1; j++) {
    const f = 1 / c.ropeTheta ** ((2 * j) / nRot)
    const ff = c.ropeFreqFactors ? c.ropeFreqFactors[j] : 1
    const y = c.ropeYarn
    if (!y) {
      out[j] = (f * c.ropeFreqScale) / ff
      continue
    }
    // rope_yarn_ramp(low, high, i0 = 2j): 1 below the low correction dim, 0 above the high one.
    const ramp = (1 - Math.min(1, Math.max(0, (j - y.corrLow) / Math.max(0.001, y.corrHigh - y.corrLow)))) * y.extFactor
    out[j] = (f / ff) * c.ropeFreqScale * (1 - ramp) + (f / ff) * ramp
  }
  return out
}

/** Scale the rotated dims of each head by the RoPE magnitude (YaRN mscale, longrope attn_factor). */
export function applyRopeMagnitude(x: Float32Array, T: number, nHeads: number, c: ModelConfig): void {
  const m = c.ropeMagnitude ?? 1
  if (m === 1) return
  const nRot = c.ropeDims ?? c.headDim
  for (let r = 0; r < T * nHeads; r++) {
    const o = r * c.headDim
    for (let i = 0; i < nRot; i++) x[o + i] = Math.fround(x[o + i] * m)
  }
}

/** Row order that turns NEOX pairing into NORM pairing within each head (see architectures.ts neoxToNormOrder). */
export function neoxToNormOrder(headDim: number, ropeDims = headDim): Int32Array {
  const half = ropeDims >> 1
  const order = new Int32Array(headDim)
  for (let j = 0; j < half; j++) {
    order[2 * j] = j
    order[2 * j + 1] = j + half
  }
  for (let i = ropeDims; i < headDim; i++) order[i] = i
  return order
}
