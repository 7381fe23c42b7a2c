import { type Kernels, KernelsUnavailableError, type KvDType, type ModelFile, selectKernels } from '../shards/index.js'
import { buildCanarySet, type CanarySet } from './canary-set.js'
import { driftMetrics } from './drift.js'
import { fitDriftModel } from './drift-fit.js'
import type { DriftFeature, DriftModel, DriftSample } from './drift-model.js'
import { CanaryArgumentError } from './errors.js'
import { createSpanRunner, type SpanRunner } from './span-runner.js'
import { WIRE_DTYPES, type WireDType, wireRoundtrip } from './wire-roundtrip.js'

/**
 * Benign variation the project itself produces, measured rather than assumed: a peer on other
 * kernels (the WebAssembly path vs the TypeScript reference), other thread counts, an f16 or
 * q8_0 KV cache, and an f16 or q8_0 wire, against references from the trusted reference kernels.
 * An f16 cache drifts about as much as the kernels do and joins the wire's class; a q8_0 cache
 * drifts an order of magnitude more, so its samples get classes of their own
 * (benignClassKey: `<wire>/kv-q8_0`), and a peer that does not announce a q8_0 cache keeps
 * the tighter ones.
 */
export type BenignProfile =
  | 'reference'
  | 'wasm-1t'
  | 'wasm-2t'
  | 'native'
  | 'reference-kvf16'
  | 'reference-kvq8_0'
  | 'native-kvf16'
  | 'native-kvq8_0'
export const BENIGN_PROFILES: readonly BenignProfile[] = [
  'reference',
  'wasm-1t',
  'wasm-2t',
  'native',
  'reference-kvf16',
  'reference-kvq8_0',
  'native-kvf16',
  'native-kvq8_0'
]

/**
 * The benign drift class a peer's canary drift is scored in: its wire dtype; `/qw` when the
 * model's matrices are Q8_0 or a block type (the fast kernels quantise activations, so a wire's
 * rounding of the input moves outputs by about 1 % instead of 0.03 %); `/kv-q8_0` when the peer
 * announces a q8_0 KV cache. A peer that announces a ggml backend (issue 32) is scored in the
 * `/qw` class whatever the weights: ggml rounds attention's Q and softmax weights to f16 and
 * reduces in its own order, so an honest ggml-cpu span drifts relL2 ~1e-3 (max 5e-3) from the
 * engine's references on f32 weights, far outside the f32 class and inside /qw's benign range
 * (docs/verification.md, test/canary/ggml-benign.test.ts).
 */
export function benignClassKey(wire: string, kvDtype?: KvDType, quantizedWeights = false, backend?: string): string {
  const qw = quantizedWeights || (backend?.startsWith('ggml-') ?? false)
  return `${wire}${qw ? '/qw' : ''}${kvDtype === 'q8_0' ? '/kv-q8_0' : ''}`
}

/** Whether the fast kernels quantise activations for this model's matrices (Q8_0 and block types but BF16). */
export function quantizedWeights(model: ModelFile): boolean {
  const d = model.weightDType
  return d !== 'f32' && d !== 'f16' && d !== 'bf16'
}

export interface ProfileKernels {
  readonly profile: BenignProfile
  readonly kernels: Kernels
  readonly kvDType: KvDType
  /** True when the fast kernels are unavailable here and the reference stands in. */
  readonly fallback: boolean
  close(): void
}

/** The kernel set a benign peer of `profile` runs (the caller closes it). */
export function profileKernels(profile: BenignProfile): ProfileKernels {
  if (!BENIGN_PROFILES.includes(profile)) throw new CanaryArgumentError(`unknown benign profile ${profile}`)
  let kernels: Kernels
  let fallback = false
  const native = profile.startsWith('native')
  if (profile === 'wasm-1t' || profile === 'wasm-2t' || native) {
    try {
      kernels = native
        ? selectKernels({ kind: 'native' })
        : selectKernels({ kind: 'wasm', threads: profile === 'wasm-1t' ? 1 : 2 })
    } catch (e) {
      if (!(e instanceof KernelsUnavailableError)) throw e
      kernels = selectKernels({ kind: 'reference' })
      fallback = true
    }
  } else kernels = selectKernels({ kind: 'reference' })
  const kvDType: KvDType = profile.endsWith('-kvf16') ? 'f16' : profile.endsWith('-kvq8_0') ? 'q8_0' : 'f32'
  return { profile, kernels, kvDType, fallback, close: () => kernels.close?.() }
}

/** Step row counts of an ordinary session over a canary: prefill of the prompt, then 1-row steps. */
export function sessionSteps(promptLength: number, length: number): number[] {
  if (!Number.isInteger(promptLength) || !Number.isInteger(length) || promptLength < 1 || promptLength > length) {
    throw new CanaryArgumentError(`prompt length ${promptLength} must be in [1, ${length}]`)
  }
  return [promptLength, ...new Array<number>(length - promptLength).fill(1)]
}

export interface PeerSession {
  readonly steps: readonly number[]
  /** The inputs as the peer received them (after the wire) [L, dim]. */
  readonly input: Float32Array
  /** The peer's outputs per span end, before the return trip over the wire [L, dim]. */
  readonly outputs: readonly Float32Array[]
}

/** What an honest peer running `runner` computes for canary `index` of `set`, sent in `wire`. */
export function runPeerSession(runner: SpanRunner, set: CanarySet, index: number, wire: WireDType, ends = set.ends): PeerSession {
  const c = set.canaries[index]
  if (!c) throw new CanaryArgumentError(`canary index ${index} is outside [0, ${set.canaries.length})`)
  const steps = sessionSteps(c.promptLength, c.tokens.length)
  const input = wireRoundtrip(c.inputs, set.dim, wire)
  return { steps, input, outputs: runner.run(input, steps, ends) }
}

export interface CalibrationTarget {
  readonly model: ModelFile
  readonly boundaries: readonly number[]
}

export interface CalibrateOptions {
  readonly targets: readonly CalibrationTarget[]
  /** Drift features of the fitted density (default relL2 and chord; drift-model.ts). */
  readonly features?: readonly DriftFeature[]
  /** Points kept per class of the density (default 400). */
  readonly maxPoints?: number
  readonly profiles?: readonly BenignProfile[]
  readonly wires?: readonly WireDType[]
  readonly prompts?: readonly string[]
  readonly tokensPerPrompt?: number
  readonly seed?: number
  /**
   * Kernels the references (the client's canary traces) are computed on. Default: the reference
   * kernels, and for a model whose matrices the fast kernels multiply with quantised activations
   * also the native ones, since a client picks those for such a model (selectKernelsFor) and
   * its references then carry their rounding, not the reference kernels'.
   */
  readonly references?: readonly ('reference' | 'native')[]
}

export interface Calibration {
  readonly samples: DriftSample[]
  readonly model: DriftModel
  /** Profiles that fell back to the reference kernels. */
  readonly fallbacks: BenignProfile[]
}

/** Every span end after a boundary (b, n]. */
export const endsAfter = (model: ModelFile, boundary: number): number[] =>
  Array.from({ length: model.config.nLayers - boundary }, (_, i) => boundary + 1 + i)

/** Drift of every step of every canary of every (boundary, end, profile, wire): benign samples. */
export function collectBenignSamples(options: CalibrateOptions): { samples: DriftSample[]; fallbacks: BenignProfile[] } {
  if (!options || !Array.isArray(options.targets) || options.targets.length === 0) {
    throw new CanaryArgumentError('calibration needs at least one target model')
  }
  const profiles = options.profiles ?? BENIGN_PROFILES
  const wires = options.wires ?? WIRE_DTYPES
  const samples: DriftSample[] = []
  const fallbacks = new Set<BenignProfile>()
  for (const { model, boundaries } of options.targets) {
    const references = options.references ?? (quantizedWeights(model) ? ['reference', 'native'] : ['reference'])
    for (const boundary of boundaries) {
      const ends = endsAfter(model, boundary)
      for (const reference of references) {
        const rk = profileKernels(reference === 'native' ? 'native' : 'reference')
        let set: CanarySet
        try {
          set = buildCanarySet({
            model,
            boundary,
            ends,
            prompts: options.prompts,
            tokensPerPrompt: options.tokensPerPrompt,
            seed: options.seed,
            kernels: rk.kernels
          })
        } finally {
          rk.close()
        }
        for (const profile of profiles) samples.push(...profileSamples(model, boundary, ends, set, profile, wires, fallbacks))
      }
    }
  }
  return { samples, fallbacks: [...fallbacks] }
}

/** The drift samples of one benign profile over every canary of `set` and every wire. */
function profileSamples(
  model: ModelFile,
  boundary: number,
  ends: number[],
  set: CanarySet,
  profile: BenignProfile,
  wires: readonly WireDType[],
  fallbacks: Set<BenignProfile>
): DriftSample[] {
  const pk = profileKernels(profile)
  // A q8_0 cache needs whole 32-blocks per KV row (shards/kv-cache.ts).
  if (pk.kvDType === 'q8_0' && model.config.kvDim % 32 !== 0) {
    pk.close()
    return []
  }
  if (pk.fallback) fallbacks.add(profile)
  const samples: DriftSample[] = []
  const runner = createSpanRunner({
    model,
    kernels: pk.kernels,
    kvDType: pk.kvDType,
    start: boundary,
    maxEnd: ends[ends.length - 1]
  })
  try {
    for (const wire of wires) {
      if (wire === 'q8_0' && set.dim % 32 !== 0) continue
      for (let i = 0; i < set.canaries.length; i++) {
        const key = benignClassKey(wire, pk.kvDType, quantizedWeights(model))
        samples.push(...sessionDrifts(set, i, runPeerSession(runner, set, i, wire), wire, key))
      }
    }
  } finally {
    runner.close()
    pk.close()
  }
  return samples
}

/** One drift sample per step and span end of a peer session (outputs sent back in `wire`; samples keyed `key`). */
export function sessionDrifts(
  set: CanarySet,
  index: number,
  session: PeerSession,
  wire: WireDType,
  key: string = wire
): DriftSample[] {
  const out: DriftSample[] = []
  set.ends.forEach((_, k) => {
    const back = wireRoundtrip(session.outputs[k], set.dim, wire)
    const ref = set.canaries[index].outputs[k]
    let pos = 0
    for (const rows of session.steps) {
      const a = back.subarray(pos * set.dim, (pos + rows) * set.dim)
      out.push({ drift: driftMetrics(a, ref.subarray(pos * set.dim, (pos + rows) * set.dim)), wire: key, kvLength: pos + rows })
      pos += rows
    }
  })
  return out
}

/** Collect benign samples and fit the benign drift model to them. */
export function calibrate(options: CalibrateOptions): Calibration {
  const { samples, fallbacks } = collectBenignSamples(options)
  const note = `benign drift: profiles ${(options.profiles ?? BENIGN_PROFILES).join(',')}; wires ${(options.wires ?? WIRE_DTYPES).join(',')}; ${samples.length} samples`
  return {
    samples,
    model: fitDriftModel(samples, { note, seed: options.seed, features: options.features, maxPoints: options.maxPoints }),
    fallbacks
  }
}
