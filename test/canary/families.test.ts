import { describe, expect, it } from 'vitest'
import { calibrate } from '../../canary/calibrate.js'
import { createRandomModel, parseShape } from '../../shards/index.js'

// Canary calibration on qwen-shaped models: the benign variation (fast kernels at 2 threads,
// an f16 KV cache, f16 and q8_0 wires, against the reference kernels) is measured on the
// family's own forward pass and stays far below a tampering peer's drift (relL2 > 0.1 in the
// e2e canary tests).

describe('canary calibration on other families', () => {
  for (const arch of [{ architecture: 'qwen2' as const }, { architecture: 'qwen3' as const, headDim: 32 }]) {
    it(`${arch.architecture}: benign samples are collected and small, the drift model fits`, () => {
      const model = createRandomModel(parseShape('64,4,4,2,96,300'), { dtype: 'q8_0', seed: 12, seqLen: 64, arch })
      const cal = calibrate({
        targets: [{ model, boundaries: [1, 2] }],
        profiles: ['wasm-2t', 'reference-kvf16'],
        wires: ['f32', 'f16', 'q8_0'],
        prompts: ['once upon a time', 'the girl was happy'],
        tokensPerPrompt: 32,
        seed: 1
      })
      expect(cal.samples.length).toBeGreaterThan(20)
      const worst = Math.max(...cal.samples.map((s) => s.drift.relL2))
      expect(Number.isFinite(worst)).toBe(true)
      expect(worst).toBeLessThan(0.05)
      expect(cal.model).toBeDefined()
    })
  }
})
