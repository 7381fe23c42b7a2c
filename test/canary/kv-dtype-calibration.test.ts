import { describe, expect, it } from 'vitest'
import {
  type BenignProfile,
  benignClassKey,
  collectBenignSamples,
  createDetector,
  DEFAULT_CANARY_PROMPTS,
  defaultBenignModel,
  densityRatio
} from '../../canary/index.js'
import { createRandomModel, parseShape } from '../../shards/index.js'

// Issue 16: an honest node with an f16 KV cache was convicted on a 256-dim Q4_K_M model. At dim
// 256 both the node and the client run the native kernels, which quantise activations: a KV
// cache's rounding then moves the output by about as much as the kernels' own rounding, ~1 %,
// and the /qw classes had been measured on the reference kernels only. They now include the
// native kernels with every KV dtype, against references from the reference and the native
// kernels (canary/calibrate.ts). Held out: a shape and seed the calibration did not use.

const HONEST: BenignProfile[] = ['native', 'native-kvf16', 'native-kvq8_0', 'reference-kvf16', 'reference-kvq8_0']

describe('benign drift of every KV dtype on quantised weights (held-out model)', () => {
  for (const dtype of ['q4_k_m', 'q8_0'] as const)
    it(`${dtype}: honest peers of every KV dtype are never convicted`, { timeout: 600_000 }, () => {
      const model = createRandomModel(parseShape('256,4,4,4,512,512'), { dtype, seed: 11, seqLen: 128 })
      const benign = defaultBenignModel()
      const { samples } = collectBenignSamples({
        targets: [{ model, boundaries: [1] }],
        profiles: HONEST,
        wires: ['f32', 'f16'],
        prompts: DEFAULT_CANARY_PROMPTS.slice(8, 10),
        tokensPerPrompt: 64
      })
      expect(samples.length).toBeGreaterThan(2000)
      // every honest answer scored in the class of the KV dtype it announces
      expect(new Set(samples.map((s) => s.wire))).toEqual(
        new Set(['f32', 'f16'].flatMap((w) => [benignClassKey(w, 'f16', true), benignClassKey(w, 'q8_0', true)]))
      )
      const det = createDetector({ benign })
      for (const [i, s] of samples.entries()) det.observe(`${s.wire}/${i % 7}`, s.drift, s.wire, s.kvLength)
      expect(det.report().filter((v) => v.excluded)).toEqual([])
      const worst = Math.max(...samples.map((s) => densityRatio(benign, s.drift, s.wire, s.kvLength)))
      expect(worst).toBeLessThan(1 / benign.contamination)
    })
})
